import { Ajv2020, type ErrorObject } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/**
 * JSON Schemas of the event-type catalog (docs/api.md#event-types): draft 2020-12, checked and
 * compiled with Ajv. A schema is compiled once per process and revision of its event type (the
 * API's catalog cache keeps the result), so checking a payload costs a call of the generated
 * function.
 *
 * Choices, each documented for users:
 * - `format` is checked for the formats of ajv-formats (date-time, email, uri, uuid, ...); a
 *   format it does not know is refused when the schema is saved, rather than silently unchecked.
 * - Keywords JSON Schema does not define (`x-...`, `example`) are allowed and ignored, as the
 *   specification says, so schemas taken from OpenAPI documents work as they are.
 * - `$ref` resolves within the schema only (`#/$defs/...`): nothing is fetched.
 */
export const JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema";

/** Checks one payload: the first problem, or undefined when it is valid. */
export type PayloadValidator = (data: unknown) => PayloadProblem | undefined;

/** Where in the payload (a JSON pointer, "" for the whole of it) and why. */
export interface PayloadProblem {
  pointer: string;
  reason: string;
}

export type CompiledSchema = { ok: true; validate: PayloadValidator } | { ok: false; problem: string };

/** What compiling one schema warned about; Ajv reports an unknown format through its logger. */
let warnings: string[] = [];

// One instance for every schema: making one compiles the meta-schemas, far dearer than compiling
// a schema. Compiling is synchronous, so `warnings` belongs to the compile in progress.
const ajv = new Ajv2020({
  strict: false,
  allErrors: false,
  logger: { log() {}, warn: (message: unknown) => void warnings.push(String(message)), error() {} },
});
addFormats(ajv);

/** The formats a schema may name. */
export const SUPPORTED_FORMATS: readonly string[] = Object.keys(ajv.formats).sort();

/** Checks a schema and compiles it; a problem is one sentence naming where in the schema it is. */
export function compileEventSchema(schema: Record<string, unknown>): CompiledSchema {
  const dialect = schema.$schema;
  if (dialect !== undefined && dialect !== JSON_SCHEMA_DIALECT && dialect !== `${JSON_SCHEMA_DIALECT}#`) {
    return { ok: false, problem: `$schema must be ${JSON_SCHEMA_DIALECT} (only draft 2020-12 is supported)` };
  }
  if (!ajv.validateSchema(schema)) {
    const [error] = ajv.errors ?? [];
    return { ok: false, problem: `is not a valid JSON Schema: ${error ? describe(error, "schema") : "invalid"}` };
  }
  warnings = [];
  try {
    const validate = ajv.compile(schema);
    const unknownFormat = warnings.find((warning) => warning.startsWith("unknown format"));
    if (unknownFormat) {
      return {
        ok: false,
        problem: `${unknownFormat.replace(" ignored in schema", "")}: the formats checked are ${SUPPORTED_FORMATS.join(", ")}`,
      };
    }
    return {
      ok: true,
      validate: (data) => {
        if (validate(data)) return undefined;
        const [error] = validate.errors ?? [];
        return error ? payloadProblem(error) : { pointer: "", reason: "does not match the schema" };
      },
    };
  } catch (error) {
    // An unresolvable $ref, an invalid `pattern`, an $id used twice in the schema.
    return { ok: false, problem: `cannot be compiled: ${(error as Error).message}` };
  } finally {
    // Forget the schema and any $id it declared: the next one may reuse them (a new revision of
    // the same type does), and the compiled function keeps what it needs.
    ajv.removeSchema();
    warnings = [];
  }
}

const escapePointer = (key: string) => key.replaceAll("~", "~0").replaceAll("/", "~1");

/** Names the failing place itself where Ajv names its parent: the missing or unexpected property. */
function payloadProblem(error: ErrorObject): PayloadProblem {
  const { params } = error;
  if (error.keyword === "required" && typeof params.missingProperty === "string") {
    return { pointer: `${error.instancePath}/${escapePointer(params.missingProperty)}`, reason: "is required" };
  }
  if (error.keyword === "additionalProperties" && typeof params.additionalProperty === "string") {
    return {
      pointer: `${error.instancePath}/${escapePointer(params.additionalProperty)}`,
      reason: "is not allowed by the schema",
    };
  }
  if (error.keyword === "unevaluatedProperties" && typeof params.unevaluatedProperty === "string") {
    return {
      pointer: `${error.instancePath}/${escapePointer(params.unevaluatedProperty)}`,
      reason: "is not allowed by the schema",
    };
  }
  return { pointer: error.instancePath, reason: error.message ?? "does not match the schema" };
}

/** `/amount: must be integer`; the whole payload is `(root)`. */
export function describePayloadProblem(problem: PayloadProblem): string {
  return `${problem.pointer === "" ? "(root)" : problem.pointer}: ${problem.reason}`;
}

function describe(error: ErrorObject, what: string): string {
  return `${what}${error.instancePath} ${error.message ?? "is invalid"}`;
}
