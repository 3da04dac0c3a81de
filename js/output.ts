// A call's output: its streams' bytes, as frames of whole lines, within the
// output budget.

/** Where a stream is printed. */
export type Stream = "stdout" | "stderr";

/**
 * The output a call may still print, in bytes. Past it, output is counted,
 * not kept or sent: an output bomb costs the bridge nothing.
 */
export class Budget {
  dropped = 0;
  constructor(public remaining: number) {}
}

/**
 * Splits one stream's bytes into lines, keeping an unfinished last line,
 * and posts the lines that fit the budget as output frames.
 */
export class LineSplitter {
  private decoder = new TextDecoder();
  private encoder = new TextEncoder();
  private partial = "";

  constructor(
    private stream: Stream,
    private budget: Budget,
    private post: (frame: string) => void,
  ) {}

  write(bytes: Uint8Array): number {
    if (this.budget.remaining < 0) {
      this.budget.dropped += bytes.length;
      return bytes.length;
    }
    const text = this.partial + this.decoder.decode(bytes, { stream: true });
    const lines = text.split("\n");
    this.partial = lines.pop()!;
    this.emit(lines);
    if (this.partial.length > this.budget.remaining) this.exhaust([]); // a line too long to ever fit
    return bytes.length;
  }

  flush() {
    const rest = this.partial + this.decoder.decode();
    this.partial = "";
    if (rest) this.emit([rest]);
  }

  private emit(lines: string[]) {
    const budget = this.budget;
    let kept = 0;
    for (; kept < lines.length; kept++) {
      const size = this.encoder.encode(lines[kept]).length + 1;
      if (size > budget.remaining) break;
      budget.remaining -= size;
    }
    if (kept > 0) {
      this.post(
        JSON.stringify({ type: "output", stream: this.stream, lines: lines.slice(0, kept) }),
      );
    }
    if (kept < lines.length) this.exhaust(lines.slice(kept));
  }

  /** Counts lines that do not fit, and the unfinished one, as dropped: the budget is spent. */
  private exhaust(lines: string[]) {
    for (const l of lines) this.budget.dropped += this.encoder.encode(l).length + 1;
    this.budget.dropped += this.encoder.encode(this.partial).length;
    this.partial = "";
    this.budget.remaining = -1;
  }
}
