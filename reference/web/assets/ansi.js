// AnsiParser turns terminal output into styled text: SGR colours and
// attributes become CSS classes, every other escape sequence and control
// character is dropped. It keeps its state between calls, so text may be
// fed in arbitrary pieces, even mid-sequence.

/** A token the parser emits besides text: end of line. */
export const NEWLINE = { newline: true };
/** A token the parser emits besides text: carriage return (the line starts over). */
export const RETURN = { cr: true };

// Characters that end a run of plain text: C0 controls but tab, and DEL.
const SPECIAL = /[\x00-\x08\x0a-\x1f\x7f]/g;
// The longest unfinished escape sequence kept for the next piece; longer
// ones are malformed and dropped.
const MAX_PENDING = 256;

export class AnsiParser {
  constructor() {
    this.pending = '';
    this.reset();
  }

  reset() {
    this.fg = null;
    this.bg = null;
    this.bold = false;
    this.italic = false;
    this.underline = false;
  }

  /** classes are the CSS classes of the current style. */
  classes() {
    const c = [];
    if (this.fg !== null) c.push(`ansi-fg-${this.fg}`);
    if (this.bg !== null) c.push(`ansi-bg-${this.bg}`);
    if (this.bold) c.push('ansi-bold');
    if (this.italic) c.push('ansi-italic');
    if (this.underline) c.push('ansi-underline');
    return c.join(' ');
  }

  /**
   * feed parses the next piece of text and returns its tokens: {text,
   * classes} runs, NEWLINE and RETURN.
   */
  feed(piece) {
    const str = this.pending + piece;
    this.pending = '';
    const out = [];
    const text = (t) => {
      if (t) out.push({ text: t, classes: this.classes() });
    };
    let i = 0;
    while (i < str.length) {
      SPECIAL.lastIndex = i;
      const m = SPECIAL.exec(str);
      const at = m ? m.index : str.length;
      text(str.slice(i, at));
      if (!m) break;
      const c = str.charCodeAt(at);
      if (c === 0x0a) {
        out.push(NEWLINE);
        i = at + 1;
      } else if (c === 0x0d) {
        if (at + 1 === str.length) {
          this.pending = '\r'; // a CRLF split between pieces
          break;
        }
        if (str.charCodeAt(at + 1) !== 0x0a) out.push(RETURN);
        i = at + 1;
      } else if (c === 0x1b) {
        const end = this.escape(str, at);
        if (end < 0) {
          const rest = str.slice(at);
          if (rest.length <= MAX_PENDING) {
            this.pending = rest;
            break;
          }
          i = at + 1; // malformed: drop the ESC, keep the rest as text
        } else {
          i = end;
        }
      } else {
        i = at + 1; // another control character: dropped
      }
    }
    return out;
  }

  /**
   * end says the text ends here: what feed held back (an unfinished escape
   * sequence, a last carriage return) is dropped.
   */
  end() {
    this.pending = '';
  }

  // escape handles the sequence starting with ESC at str[at] and returns
  // the index after it, or -1 if str ends before it does.
  escape(str, at) {
    if (at + 1 >= str.length) return -1;
    const kind = str[at + 1];
    if (kind === '[') {
      // CSI: parameter and intermediate bytes, then a final byte 0x40–0x7e.
      for (let j = at + 2; j < str.length; j++) {
        const c = str.charCodeAt(j);
        if (c >= 0x40 && c <= 0x7e) {
          if (str[j] === 'm') this.sgr(str.slice(at + 2, j));
          return j + 1;
        }
        if (c < 0x20 || c > 0x3f) return j; // not a CSI byte: drop what came before it
      }
      return -1;
    }
    if (kind === ']' || kind === 'P' || kind === '_' || kind === '^') {
      // OSC, DCS, APC, PM: a string up to BEL or ESC \.
      for (let j = at + 2; j < str.length; j++) {
        const c = str.charCodeAt(j);
        if (c === 0x07) return j + 1;
        if (c === 0x1b) {
          if (j + 1 >= str.length) return -1;
          if (str[j + 1] === '\\') return j + 2;
        }
      }
      return -1;
    }
    return at + 2; // a two-byte escape
  }

  // sgr applies Select Graphic Rendition parameters.
  sgr(params) {
    const codes = params === '' ? [0] : params.split(/[;:]/).map((p) => (p === '' ? 0 : Number.parseInt(p, 10)));
    for (let k = 0; k < codes.length; k++) {
      const c = codes[k];
      if (c === 0) this.reset();
      else if (c === 1) this.bold = true;
      else if (c === 3) this.italic = true;
      else if (c === 4) this.underline = true;
      else if (c === 22) this.bold = false;
      else if (c === 23) this.italic = false;
      else if (c === 24) this.underline = false;
      else if (c >= 30 && c <= 37) this.fg = c - 30;
      else if (c === 39) this.fg = null;
      else if (c >= 40 && c <= 47) this.bg = c - 40;
      else if (c === 49) this.bg = null;
      else if (c >= 90 && c <= 97) this.fg = c - 90 + 8;
      else if (c >= 100 && c <= 107) this.bg = c - 100 + 8;
      else if (c === 38 || c === 48) {
        // Extended colours: 5;n (256 colours, of which the first 16 are
        // kept) or 2;r;g;b (dropped); their parameters are skipped.
        const fg = c === 38;
        if (codes[k + 1] === 5) {
          const n = codes[k + 2];
          if (n >= 0 && n < 16) {
            if (fg) this.fg = n;
            else this.bg = n;
          }
          k += 2;
        } else if (codes[k + 1] === 2) {
          k += 4;
        }
      }
    }
  }
}
