// NDJSON framing: one JSON value per LF-terminated line, in both directions.

/** Splits a byte stream into lines; refuses a line longer than `maxLineBytes`. */
export class LineSplitter {
  private chunks: Buffer[] = [];
  private pending = 0;

  constructor(private readonly maxLineBytes: number) {}

  /** Complete lines in `chunk` (without the LF); throws RangeError past the cap. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const lf = chunk.indexOf(0x0a, start);
      if (lf < 0) break;
      const piece = chunk.subarray(start, lf);
      const line = this.pending ? Buffer.concat([...this.chunks, piece]) : piece;
      this.chunks = [];
      this.pending = 0;
      if (line.length > this.maxLineBytes) {
        throw new RangeError(`a frame of ${line.length} bytes exceeds the ${this.maxLineBytes}-byte cap`);
      }
      lines.push(line.toString("utf8").replace(/\r$/, ""));
      start = lf + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.chunks.push(Buffer.from(rest));
      this.pending += rest.length;
      if (this.pending > this.maxLineBytes) {
        throw new RangeError(`a frame exceeds the ${this.maxLineBytes}-byte cap before its end`);
      }
    }
    return lines;
  }
}

export function encodeFrame(message: unknown): string {
  return `${JSON.stringify(message)}\n`;
}
