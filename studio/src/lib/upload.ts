import { authHeader, toApiError } from './api.ts';
import type { TroupeDocument } from './types.ts';

/** The eight types the API accepts (it checks the bytes, not the name). */
export const ACCEPTED = '.pdf,.docx,.txt,.md,.markdown,.html,.htm,.png,.jpg,.jpeg,.webp,application/pdf,application/vnd.openxmlformats-officedocument.wordprocessingml.document,text/plain,text/markdown,text/html,image/png,image/jpeg,image/webp';

/** Uploads one file as multipart `file`; XHR because fetch reports no upload progress. */
export function uploadDocument(characterId: string, file: File, onProgress: (fraction: number) => void): Promise<TroupeDocument> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/characters/${encodeURIComponent(characterId)}/documents`);
    for (const [name, value] of Object.entries(authHeader('key'))) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) resolve(JSON.parse(xhr.responseText) as TroupeDocument);
      else reject(toApiError(xhr.status, xhr.responseText, 'key'));
    };
    xhr.onerror = () => reject(toApiError(0, '', 'key'));
    const form = new FormData();
    form.append('file', file, file.name);
    xhr.send(form);
  });
}
