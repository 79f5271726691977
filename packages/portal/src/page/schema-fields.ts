/**
 * An event type's JSON Schema as a customer reads it: one row per field of the payload, with its
 * type in words, whether it is always there, and its description. The schema itself stays a
 * click away; this covers what schemas of payloads commonly say (properties, required, type,
 * format, enum, items, local $ref), and says "see the schema" for the rest.
 */
export interface SchemaField {
  /** `amount`, `customer.email`, `lines[].sku`. */
  path: string;
  type: string;
  /** "Yes", "No", or "Yes, when customer is present" for a field of an optional object. */
  required: string;
  description: string;
}

type Schema = Record<string, unknown>;

const MAX_DEPTH = 4;
const MAX_FIELDS = 200;

const isSchema = (value: unknown): value is Schema =>
  typeof value === "object" && value !== null && !Array.isArray(value);

export function schemaFields(root: Schema): SchemaField[] {
  const fields: SchemaField[] = [];
  const resolve = (schema: Schema, seen = 0): Schema => {
    const ref = schema.$ref;
    if (typeof ref !== "string" || !ref.startsWith("#/") || seen > 8) return schema;
    const target = ref
      .slice(2)
      .split("/")
      .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
      .reduce<unknown>((node, part) => (isSchema(node) ? node[part] : undefined), root);
    return isSchema(target) ? resolve(target, seen + 1) : schema;
  };

  /** `optionalParent`: the nearest object above that may be missing (its path), if any. */
  const walk = (schema: Schema, prefix: string, depth: number, optionalParent: string | undefined) => {
    const properties = isSchema(schema.properties) ? schema.properties : {};
    const required = Array.isArray(schema.required) ? schema.required : [];
    // By name: the author's order does not survive storage (the API keeps schemas as jsonb).
    for (const [name, value] of Object.entries(properties).sort(([a], [b]) => a.localeCompare(b))) {
      if (fields.length >= MAX_FIELDS || !isSchema(value)) continue;
      const field = resolve(value);
      const path = prefix ? `${prefix}.${name}` : name;
      const isRequired = required.includes(name);
      fields.push({
        path,
        type: typeInWords(field, resolve),
        required: !isRequired ? "No" : optionalParent ? `Yes, when ${optionalParent} is present` : "Yes",
        description: typeof field.description === "string" ? field.description : "",
      });
      if (depth >= MAX_DEPTH) continue;
      const below = isRequired ? optionalParent : (optionalParent ?? path);
      if (isSchema(field.properties)) walk(field, path, depth + 1, below);
      // An item's required fields are there in every item, however many (or few) there are.
      const items = isSchema(field.items) ? resolve(field.items) : undefined;
      if (items && isSchema(items.properties)) walk(items, `${path}[]`, depth + 1, below);
    }
  };

  walk(resolve(root), "", 1, undefined);
  return fields;
}

/** `string (date-time)`, `integer`, `one of "usd", "eur"`, `array of string`, `string or null`. */
function typeInWords(schema: Schema, resolve: (schema: Schema) => Schema): string {
  if (Array.isArray(schema.enum)) return `one of ${schema.enum.map((value) => JSON.stringify(value)).join(", ")}`;
  if ("const" in schema) return `always ${JSON.stringify(schema.const)}`;
  const types = Array.isArray(schema.type) ? schema.type : typeof schema.type === "string" ? [schema.type] : [];
  const words = types.map((type) => {
    if (type === "array" && isSchema(schema.items)) return `array of ${typeInWords(resolve(schema.items), resolve)}`;
    if (type === "string" && typeof schema.format === "string") return `string (${schema.format})`;
    return String(type);
  });
  if (words.length > 0) return words.join(" or ");
  const alternatives = Array.isArray(schema.anyOf) ? schema.anyOf : Array.isArray(schema.oneOf) ? schema.oneOf : [];
  if (alternatives.length > 0)
    return alternatives
      .map((alternative) => (isSchema(alternative) ? typeInWords(resolve(alternative), resolve) : "?"))
      .join(" or ");
  if (isSchema(schema.properties)) return "object";
  return "any (see the schema)";
}
