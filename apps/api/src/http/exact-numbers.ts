/**
 * JSON numbers are parsed into IEEE 754 doubles, which silently change some of them: `1e400`
 * becomes Infinity (stored as null), `12345678901234567890` becomes 12345678901234567000. The
 * API refuses such numbers instead of storing and delivering a value the client did not send
 * (and treating two different values as the same request for Idempotency-Key). Accepted:
 * integers within ±(2^53 - 1), which every JSON parser reads exactly, and other numbers whose
 * value as a double is the same decimal number as their text (`0.1`, `1.50`, `2.5e-3`).
 */

/** A number in a JSON text that cannot be kept exactly: its path and why. */
export interface InexactNumber {
  /** `data.amount`, `data.items[2]`: as the validation errors name fields. */
  path: string;
  reason: string;
}

// A text with no run of 16 digits or dots and no exponent holds only numbers of at most 15
// significant digits, which a double keeps exactly; most bodies need no closer look.
const mayHoldInexactNumber = /[\d.]{16}|\d[eE]/;
const numberToken = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** The first number in `text` (valid JSON) that parsing would change, or undefined. */
export function findInexactNumber(text: string): InexactNumber | undefined {
  if (!mayHoldInexactNumber.test(text)) return undefined;
  // Where the scan is: one frame per open object or array, with the current key or index.
  const frames: { key: string | number; inObject: boolean; expectingKey: boolean }[] = [];
  const path = () =>
    frames.reduce<string>(
      (name, frame) =>
        typeof frame.key === "number" ? `${name}[${frame.key}]` : name ? `${name}.${frame.key}` : frame.key,
      "",
    );

  for (let i = 0; i < text.length; ) {
    const char = text[i]!;
    const top = frames[frames.length - 1];
    if (char === "{" || char === "[") {
      frames.push({ key: char === "[" ? 0 : "", inObject: char === "{", expectingKey: char === "{" });
      i++;
    } else if (char === "}" || char === "]") {
      frames.pop();
      i++;
    } else if (char === ",") {
      if (top?.inObject) top.expectingKey = true;
      else if (top && typeof top.key === "number") top.key++;
      i++;
    } else if (char === ":") {
      if (top) top.expectingKey = false;
      i++;
    } else if (char === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === "\\" ? 2 : 1;
      if (top?.inObject && top.expectingKey) top.key = JSON.parse(text.slice(i, end + 1)) as string;
      i = end + 1;
    } else if (char === "-" || (char >= "0" && char <= "9")) {
      numberToken.lastIndex = i;
      const token = numberToken.exec(text)?.[0] ?? char;
      const reason = inexactReason(token);
      if (reason) return { path: path(), reason };
      i += token.length;
    } else {
      i++; // whitespace, and the letters of true, false and null
    }
  }
  return undefined;
}

function inexactReason(token: string): string | undefined {
  const value = Number(token);
  if (!Number.isFinite(value)) return "is too large to be represented exactly; send it as a string";
  if (/^-?\d+$/.test(token)) {
    return Number.isSafeInteger(value)
      ? undefined
      : "is an integer beyond ±9007199254740991, which JSON parsers do not keep exactly; send it as a string";
  }
  return sameDecimal(token, String(value))
    ? undefined
    : "has more digits, or is smaller, than a JSON number keeps exactly; send it as a string";
}

/** Whether two decimal texts (`1.50`, `15e-1`) denote the same number. */
function sameDecimal(a: string, b: string): boolean {
  const x = normalize(a);
  const y = normalize(b);
  return x.digits === y.digits && (x.digits === "" || (x.negative === y.negative && x.exponent === y.exponent));
}

function normalize(text: string): { negative: boolean; digits: string; exponent: number } {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match) return { negative: false, digits: text, exponent: 0 };
  const fraction = match[3] ?? "";
  let digits = (match[2]! + fraction).replace(/^0+/, "");
  let exponent = Number(match[4] ?? 0) - fraction.length;
  const trailing = /0*$/.exec(digits)![0].length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return { negative: match[1] === "-", digits, exponent };
}
