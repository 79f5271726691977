import {
  compileEventSchema,
  describePayloadProblem,
  PayloadInvalidError,
  type PayloadValidator,
  ValidationError,
} from "@webhooks/core";
import { findEventType, type PrismaClientOrTransaction } from "@webhooks/db";
import { LRUCache } from "lru-cache";

/** What this process knows of one event type: its catalog revision (0: not in the catalog) and compiled schema. */
interface CatalogEntry {
  revision: number;
  archived: boolean;
  validate: PayloadValidator | undefined;
}

/** Types remembered at once. Beyond it the least recently published are read again when next published. */
const MAX_ENTRIES = 10_000;

/**
 * The event-type catalog as the publish path reads it (docs/api.md#event-types): each type's
 * entry is read once and its schema compiled once, then kept, so that checking a publish costs no
 * database round trip and a call of the compiled validator.
 *
 * Nothing kept here is trusted to be current; several API processes each keep their own, and a
 * PUT reaches one of them. So:
 * - an event it accepts goes to the publish statement with the revision it was checked against,
 *   and the statement writes it only if that is still the type's revision (packages/db's
 *   publishEvents); otherwise the publisher forgets the entry and checks the event again;
 * - an event it would refuse is checked again against the entry read afresh, and refused only if
 *   that refuses it too.
 * A change of the catalog therefore applies to every publish that starts after it, on every
 * process, at the price of one more read for the first publish of the type after the change.
 */
export class EventTypeCatalogCache {
  private readonly entries = new LRUCache<string, CatalogEntry>({ max: MAX_ENTRIES });
  /** Reads in flight, so that a burst of publishes of a type not yet known reads it once. */
  private readonly loading = new Map<string, Promise<CatalogEntry>>();

  constructor(private readonly deps: { db: PrismaClientOrTransaction; strict: boolean }) {}

  /**
   * Checks an event against its type's entry: the revision the publish statement must confirm,
   * or the refusal (400 unknown_event_type when EVENT_TYPES_STRICT refuses the type, 422
   * payload_invalid when `data` breaks its schema).
   */
  async checkPublish(type: string, data: Record<string, unknown>): Promise<number> {
    const cached = this.entries.get(type);
    const entry = cached ?? (await this.load(type));
    if (!this.refusal(entry, type, data)) return entry.revision;
    const fresh = cached === undefined ? entry : await this.load(type);
    const refusal = this.refusal(fresh, type, data);
    if (refusal) throw refusal;
    return fresh.revision;
  }

  /**
   * A test event (POST /v1/subscriptions/{id}/test) must match its type's schema like any event,
   * but is not refused by EVENT_TYPES_STRICT: it goes to one subscription, on request, and its
   * default type (`webhook.test`) is in no catalog. Read afresh: tests are rare.
   */
  async checkTestEvent(type: string, data: Record<string, unknown>): Promise<void> {
    const refusal = this.refusal(await this.load(type), type, data, { strict: false });
    if (refusal) throw refusal;
  }

  /** The type changed (here or, as a publish found, elsewhere): read it again when next needed. */
  forget(type: string): void {
    this.entries.delete(type);
  }

  private refusal(
    entry: CatalogEntry,
    type: string,
    data: Record<string, unknown>,
    options = { strict: this.deps.strict },
  ): Error | undefined {
    if (options.strict && (entry.revision === 0 || entry.archived)) {
      return new ValidationError(
        entry.revision === 0
          ? `type ${type} is not in the event-type catalog, and only its types may be published (EVENT_TYPES_STRICT)`
          : `type ${type} is archived in the event-type catalog, and archived types may not be published (EVENT_TYPES_STRICT)`,
        "unknown_event_type",
        "type",
      );
    }
    const problem = entry.validate?.(data);
    if (problem) {
      return new PayloadInvalidError(
        `data does not match the schema of event type ${type}: ${describePayloadProblem(problem)}`,
      );
    }
    return undefined;
  }

  private load(type: string): Promise<CatalogEntry> {
    const pending = this.loading.get(type);
    if (pending) return pending;
    const loaded = this.read(type).finally(() => this.loading.delete(type));
    this.loading.set(type, loaded);
    return loaded;
  }

  private async read(type: string): Promise<CatalogEntry> {
    const eventType = await findEventType({ db: this.deps.db }, type);
    let validate: PayloadValidator | undefined;
    if (eventType?.schema) {
      const compiled = compileEventSchema(eventType.schema);
      // Checked when it was saved; failing now means the validator changed under it (an upgrade).
      if (!compiled.ok)
        throw new Error(`The stored schema of event type ${type} no longer compiles: ${compiled.problem}`);
      validate = compiled.validate;
    }
    const entry = { revision: eventType?.revision ?? 0, archived: eventType?.archived ?? false, validate };
    this.entries.set(type, entry);
    return entry;
  }
}
