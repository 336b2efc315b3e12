// HTML to sections with htmlparser2 (also used for DOCX, which mammoth turns into HTML).
// Only text a reader sees is kept: scripts, styles and templates are dropped.
import { Parser } from 'htmlparser2';
import { SectionBuilder } from './section-builder.ts';
import type { TextSection } from './types.ts';

/** Elements whose content is never shown as text. */
const HIDDEN = new Set(['script', 'style', 'noscript', 'template', 'title', 'iframe', 'object', 'svg', 'math']);

/** Elements that start a new paragraph. */
const BLOCKS = new Set([
  'address', 'article', 'aside', 'blockquote', 'dd', 'details', 'div', 'dl', 'dt', 'figcaption', 'figure',
  'footer', 'form', 'header', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'summary', 'table',
  'tr', 'ul', 'caption', 'body', 'br',
]);

const HEADING = /^h([1-6])$/;

export function htmlToSections(html: string, maxChars: number): TextSection[] {
  const out = new SectionBuilder({ maxChars });
  let hidden = 0;
  let pre = 0;
  let heading: { level: number; text: string } | null = null;
  const endHeading = (): void => {
    if (heading !== null) out.heading(heading.level, heading.text);
    heading = null;
  };

  const parser = new Parser(
    {
      onopentag(name) {
        if (HIDDEN.has(name)) hidden++;
        if (hidden > 0) return;
        const level = HEADING.exec(name)?.[1];
        if (level !== undefined) {
          endHeading();
          heading = { level: Number(level), text: '' };
        } else if (BLOCKS.has(name)) {
          endHeading(); // a block inside a heading means the heading was never closed
          out.paragraph();
        }
        if (name === 'pre') pre++;
        if (name === 'td' || name === 'th') out.text(' ');
      },
      ontext(data) {
        if (hidden > 0) return;
        if (heading !== null) heading.text += data;
        else out.text(pre > 0 ? data : data.replace(/\s+/g, ' '));
      },
      onclosetag(name) {
        if (HIDDEN.has(name)) {
          hidden = Math.max(0, hidden - 1);
          return;
        }
        if (hidden > 0) return;
        if (HEADING.test(name)) endHeading();
        else if (BLOCKS.has(name)) out.paragraph();
        if (name === 'pre') pre = Math.max(0, pre - 1);
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.end(html);
  endHeading();
  return out.finish();
}
