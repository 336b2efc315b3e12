// Markdown to sections: ATX (`# Title`) and setext (`Title` over `===`/`---`) headings give the
// heading path; the text itself is kept as written. Lines inside code fences are never headings.
import { SectionBuilder } from './section-builder.ts';
import type { TextSection } from './types.ts';

const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})/;

export function markdownToSections(markdown: string, maxChars: number): TextSection[] {
  const out = new SectionBuilder({ maxChars });
  let paragraph: string[] = [];
  let fence: string | null = null;
  const endParagraph = (): void => {
    if (paragraph.length > 0) {
      out.text(paragraph.join('\n'));
      out.paragraph();
    }
    paragraph = [];
  };

  for (const line of markdown.replace(/\r\n?/g, '\n').split('\n')) {
    const fenceMark = FENCE.exec(line)?.[1];
    if (fence !== null) {
      paragraph.push(line);
      if (fenceMark !== undefined && fenceMark[0] === fence[0] && fenceMark.length >= fence.length) fence = null;
      continue;
    }
    if (fenceMark !== undefined) {
      endParagraph();
      fence = fenceMark;
      paragraph.push(line);
      continue;
    }
    const atx = ATX.exec(line);
    if (atx !== null) {
      endParagraph();
      out.heading(atx[1]!.length, atx[2] ?? '');
      continue;
    }
    const setext = SETEXT.exec(line)?.[1];
    if (setext !== undefined && paragraph.length > 0) {
      out.heading(setext[0] === '=' ? 1 : 2, paragraph.join(' '));
      paragraph = [];
      continue;
    }
    if (line.trim() === '') endParagraph();
    else paragraph.push(line);
  }
  endParagraph();
  return out.finish();
}
