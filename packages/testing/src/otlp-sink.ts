import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** A span as an OTLP/HTTP JSON export carries it, flattened for assertions. */
export interface ExportedSpan {
  serviceName: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  links: { traceId: string; spanId: string }[];
}

export interface OtlpSink {
  /** The base endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT (spans arrive on /v1/traces). */
  endpoint: string;
  /** Every span of the JSON exports received so far. */
  spans: ExportedSpan[];
  /** Every export received, as it came (the protobuf ones are kept only here). */
  requests: { path: string; contentType: string; body: Buffer }[];
  /** Exports and bytes received, also when they are not kept. */
  received: { requests: number; bytes: number };
  close(): Promise<void>;
}

type JsonValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type JsonAttribute = { key: string; value: JsonValue };
interface JsonExport {
  resourceSpans?: {
    resource?: { attributes?: JsonAttribute[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: JsonAttribute[];
        status?: { code?: number; message?: string };
        links?: { traceId: string; spanId: string }[];
      }[];
    }[];
  }[];
}

/**
 * A real OTLP/HTTP receiver on loopback, as a collector would be: it answers every export with
 * 200 and keeps what it got, decoding the http/json ones. With `record: false` it only counts
 * (a benchmark exports more spans than it could keep).
 */
export async function startOtlpSink(options: { record?: boolean } = {}): Promise<OtlpSink> {
  const spans: ExportedSpan[] = [];
  const requests: OtlpSink["requests"] = [];
  const received = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const contentType = req.headers["content-type"] ?? "";
      received.requests++;
      received.bytes += body.length;
      if (options.record !== false) requests.push({ path: req.url ?? "", contentType, body });
      if (options.record !== false && contentType.startsWith("application/json"))
        spans.push(...decodeJsonExport(JSON.parse(body.toString())));
      res.writeHead(200, { "content-type": contentType || "application/json" });
      res.end(contentType.startsWith("application/json") ? "{}" : "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    requests,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function decodeJsonExport(payload: JsonExport): ExportedSpan[] {
  return (payload.resourceSpans ?? []).flatMap((resourceSpans) => {
    const serviceName = String(attributesOf(resourceSpans.resource?.attributes)["service.name"] ?? "");
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        serviceName,
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? "",
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? "" },
        links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId })),
      })),
    );
  });
}

function attributesOf(attributes: JsonAttribute[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries(
    (attributes ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
        value.boolValue ??
        value.doubleValue ??
        "",
    ]),
  );
}
