// Collects extracted text into sections: a new section starts whenever the heading path or the
// page changes, so each section's text has exactly one origin. Text past the cap is dropped.
import type { TextSection } from './types.ts';

export class SectionBuilder {
  private readonly sections: TextSection[] = [];
  private readonly headings: { level: number; text: string }[] = [];
  private paragraphs: string[] = [];
  private current = '';
  private page: number | null = null;
  private chars = 0;
  private readonly maxChars: number;

  constructor(options: { maxChars: number }) {
    this.maxChars = options.maxChars;
  }

  /** A heading at `level` (1 outermost) closes every open heading at the same or a deeper level. */
  heading(level: number, text: string): void {
    const title = text.replace(/\s+/g, ' ').trim();
    if (title === '') return;
    this.flush();
    while ((this.headings.at(-1)?.level ?? 0) >= level) this.headings.pop();
    this.headings.push({ level, text: title });
  }

  setPage(page: number | null): void {
    if (page === this.page) return;
    this.flush();
    this.page = page;
  }

  /** Appends to the current paragraph. */
  text(text: string): void {
    const kept = text.slice(0, this.maxChars - this.chars);
    this.chars += kept.length;
    this.current += kept;
  }

  /** Ends the current paragraph; empty paragraphs vanish. */
  paragraph(): void {
    const trimmed = this.current.trim();
    if (trimmed !== '') this.paragraphs.push(trimmed);
    this.current = '';
  }

  private flush(): void {
    this.paragraph();
    if (this.paragraphs.length === 0) return;
    this.sections.push({
      text: this.paragraphs.join('\n\n'),
      page: this.page,
      headingPath: this.headings.map((h) => h.text),
    });
    this.paragraphs = [];
  }

  finish(): TextSection[] {
    this.flush();
    return this.sections;
  }
}
