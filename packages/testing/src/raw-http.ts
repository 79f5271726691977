import { connect } from "node:net";

/** Sends raw bytes on a fresh connection to 127.0.0.1:`port` and returns all the server sent until it closed. */
export function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setTimeout(5_000, () => socket.destroy(new Error("no answer within 5 s")));
    socket.on("data", (chunk) => (received += chunk.toString()));
    socket.on("error", reject);
    socket.on("close", () => resolve(received));
    socket.write(bytes);
  });
}

/** The first response in `text`: its status, lower-cased headers, and body parsed as JSON. */
export function parseRawResponse(text: string) {
  const [head = "", ...rest] = text.split("\r\n\r\n");
  const [statusLine = "", ...headerLines] = head.split("\r\n");
  const headers = Object.fromEntries(
    headerLines.map((line) => [
      line.slice(0, line.indexOf(":")).toLowerCase(),
      line.slice(line.indexOf(":") + 1).trim(),
    ]),
  );
  return { status: Number(statusLine.split(" ")[1]), headers, body: JSON.parse(rest.join("\r\n")) };
}

/** Every response in `text`, in order: a head, and a body as long as its Content-Length says. */
export function parseRawResponses(text: string) {
  const responses: ReturnType<typeof parseRawResponse>[] = [];
  let rest = text;
  while (rest.includes("\r\n\r\n")) {
    const headEnd = rest.indexOf("\r\n\r\n") + 4;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(rest.slice(0, headEnd))?.[1]);
    responses.push(parseRawResponse(rest.slice(0, headEnd + length)));
    rest = rest.slice(headEnd + length);
  }
  return responses;
}
