import {
  type ClientCertificate,
  type ClientCertificateView,
  checkDestinationUrl,
  type DeliveryOrdering,
  type DestinationPolicy,
  type DisabledReason,
  type EndpointAuth,
  type EndpointAuthView,
  type EndpointHealth,
  generateSigningKeyPair,
  generateSigningSecret,
  isId,
  NotFoundError,
  newId,
  type PayloadFilter,
  payloadFilterJsonPathOf,
  type SecretBox,
  type SignatureScheme,
  urlSpellingProblem,
  ValidationError,
} from "@webhooks/core";
import { inTransaction, Prisma, type PrismaClientOrTransaction } from "./client.ts";
import { releaseLine } from "./delivery-resends.ts";
import {
  assertNoAuthorizationConflict,
  type CredentialColumns,
  checkCredentials,
  jsonOrNull,
  readCredentials,
  retireCredentials,
  writeCredentials,
} from "./endpoint-credentials.ts";
import { assertSubscribableEventTypes } from "./event-types.ts";
import { fetchPage, type Page, type PageQuery, type PageRequest } from "./paging.ts";
import {
  type ScopedContext,
  type ScopedListContext,
  scopeConditions,
  scopeWhere,
  type TenantScope,
} from "./tenant-scope.ts";

export interface SubscriptionContext {
  db: PrismaClientOrTransaction;
  secretBox: SecretBox;
  destinationPolicy: DestinationPolicy;
  /** max_in_flight of a subscription created without one: the deployment's DEFAULT_MAX_IN_FLIGHT. */
  defaultMaxInFlight: number;
  /** EVENT_TYPES_STRICT: `events` may name only "*", operational types and the catalog's types (default false). */
  eventTypesStrict?: boolean | undefined;
}

/** A subscription with its limits and its health, which the workers keep. */
export interface SubscriptionRecord extends EndpointHealth {
  id: string;
  url: string;
  events: string[];
  description: string;
  createdAt: Date;
  maxInFlight: number;
  /** Attempts per second at most; null for no limit. */
  rateLimit: number | null;
  /** Extra request headers sent with each delivery (docs/api.md#custom-headers). */
  headers: Record<string, string>;
  /** The tenant it belongs to, or null. Never changes. */
  tenantId: string | null;
  /** The payload filter (docs/api.md#payload-filters), or null for none. */
  filter: PayloadFilter | null;
  /** How its webhooks are signed (docs/api.md#signature-schemes). Never changes. */
  signatureScheme: SignatureScheme;
  /** The current ed25519 public key (`whpk_...`); null for hmac-sha256. */
  publicKey: string | null;
  /** The readable half of its endpoint authentication, or null (docs/api.md#endpoint-authentication). */
  auth: EndpointAuthView | null;
  clientCertificate: ClientCertificateView | null;
  /** "none" or "fifo" (docs/api.md#ordered-delivery). */
  ordering: DeliveryOrdering;
}

/** A row as read; disabled_reason and signature_scheme are plain text in the table, the JSON columns any JSON. */
type SubscriptionRow = Omit<
  SubscriptionRecord,
  "disabledReason" | "headers" | "filter" | "signatureScheme" | "auth" | "clientCertificate" | "ordering"
> & {
  disabledReason: string | null;
  headers: unknown;
  filter: unknown;
  signatureScheme: string;
  auth: unknown;
  clientCertificate: unknown;
  ordering: string;
};

const subscriptionFields = {
  id: true,
  url: true,
  events: true,
  description: true,
  active: true,
  createdAt: true,
  maxInFlight: true,
  rateLimit: true,
  headers: true,
  tenantId: true,
  filter: true,
  signatureScheme: true,
  publicKey: true,
  auth: true,
  clientCertificate: true,
  ordering: true,
  consecutiveFailures: true,
  failingSince: true,
  lastSuccessAt: true,
  lastFailureAt: true,
  circuitOpenedAt: true,
  heldUntil: true,
  retryAfterUntil: true,
  disabledReason: true,
} as const satisfies Record<keyof SubscriptionRecord, true>;

const subscriptionColumns = Prisma.sql`
  id, url, events, description, active, created_at AS "createdAt",
  max_in_flight AS "maxInFlight", rate_limit AS "rateLimit", headers, tenant_id AS "tenantId", filter,
  signature_scheme AS "signatureScheme", public_key AS "publicKey", auth, client_certificate AS "clientCertificate", ordering,
  consecutive_failures AS "consecutiveFailures", failing_since AS "failingSince",
  last_success_at AS "lastSuccessAt", last_failure_at AS "lastFailureAt",
  circuit_opened_at AS "circuitOpenedAt", held_until AS "heldUntil", retry_after_until AS "retryAfterUntil",
  disabled_reason AS "disabledReason"`;

const disabledReasons: readonly string[] = ["failing", "gone"] satisfies DisabledReason[];

function toSubscriptionRecord(row: SubscriptionRow): SubscriptionRecord {
  const { disabledReason } = row;
  if (disabledReason !== null && !disabledReasons.includes(disabledReason)) {
    // Only the workers write this column, through core's rules; anything else is a bug to surface.
    throw new Error(`Subscription ${row.id} has an unknown disabled_reason: ${disabledReason}`);
  }
  // Only the API writes headers, filter, auth and client_certificate, after checking them (core's
  // customHeadersProblem, parsePayloadFilter, checkCredentials), and signature_scheme and ordering,
  // from their enums.
  return {
    ...row,
    disabledReason: disabledReason as DisabledReason | null,
    headers: row.headers as Record<string, string>,
    filter: row.filter as PayloadFilter | null,
    signatureScheme: row.signatureScheme as SignatureScheme,
    auth: (row.auth ?? null) as EndpointAuthView | null,
    clientCertificate: (row.clientCertificate ?? null) as ClientCertificateView | null,
    ordering: row.ordering as DeliveryOrdering,
  };
}

/**
 * The health columns core's `reenable` resets (PUT active:true clears disabled_reason and closes
 * the circuit: docs/api.md#update-a-subscription). Written in the same UPDATE as `active`, rather
 * than read, changed and written back, so that a worker recording an attempt meanwhile is not
 * undone.
 */
const reenabledHealth = {
  disabledReason: null,
  circuitOpenedAt: null,
  heldUntil: null,
  retryAfterUntil: null,
  consecutiveFailures: 0,
  failingSince: null,
} as const satisfies Partial<EndpointHealth>;

function assertDeliverableUrl(url: string, policy: DestinationPolicy): void {
  const verdict = checkDestinationUrl(url, policy);
  if (!verdict.ok) throw new ValidationError(`url ${verdict.reason}`, "url_invalid", "url");
  const misspelt = urlSpellingProblem(url, verdict.url);
  if (misspelt) throw new ValidationError(`url ${misspelt}`, "url_invalid", "url");
}

/**
 * Writes a filter and its SQL form together (the Prisma client cannot write a jsonpath column).
 * The API checked the filter; one that does not compile here is a bug, not a client's mistake.
 */
async function writeFilter(db: PrismaClientOrTransaction, id: string, filter: PayloadFilter | null): Promise<void> {
  const path = filter === null ? null : payloadFilterJsonPathOf(filter);
  if (filter !== null && path === undefined) throw new Error(`Subscription ${id}: the filter was not checked`);
  await db.$executeRaw`
    UPDATE subscriptions SET filter = ${filter === null ? null : JSON.stringify(filter)}::jsonb, filter_path = ${path}::jsonpath,
      updated_at = now()
    WHERE id = ${id}`;
}

export async function createSubscription(
  ctx: SubscriptionContext,
  input: {
    url: string;
    events: string[];
    description?: string | undefined;
    active?: boolean | undefined;
    maxInFlight?: number | undefined;
    rateLimit?: number | null | undefined;
    headers?: Record<string, string> | undefined;
    /** The tenant; the route decides it from the scope (tenantForNewResource). */
    tenantId?: string | null | undefined;
    /** A payload filter the API has checked, or null for none. */
    filter?: PayloadFilter | null | undefined;
    signatureScheme?: SignatureScheme | undefined;
    auth?: EndpointAuth | null | undefined;
    clientCertificate?: ClientCertificate | null | undefined;
    ordering?: DeliveryOrdering | undefined;
  },
): Promise<{ subscription: SubscriptionRecord; secret: string | undefined }> {
  assertDeliverableUrl(input.url, ctx.destinationPolicy);
  if (ctx.eventTypesStrict) await assertSubscribableEventTypes(ctx, input.events);
  const certificateView = checkCredentials(input, ctx.destinationPolicy, new Date()) ?? null;
  assertNoAuthorizationConflict(input.headers ?? {}, Boolean(input.auth));
  // docs/api.md#signature-schemes: an ed25519 subscription's private key is never shown; its
  // public key is on every read.
  const signatureScheme = input.signatureScheme ?? "hmac-sha256";
  const keyPair = signatureScheme === "ed25519" ? generateSigningKeyPair() : undefined;
  const secret = keyPair?.privateKey ?? generateSigningSecret();
  const filter = input.filter ?? null;
  const subscription = await inTransaction(ctx.db, async (tx) => {
    const credentials = await writeCredentials(
      tx,
      ctx.secretBox,
      { auth: input.auth ?? null, client_certificate: input.clientCertificate ?? null },
      certificateView,
    );
    const secretId = newId("secret");
    await tx.signingSecret.create({
      data: { id: secretId, ciphertext: new Uint8Array(ctx.secretBox.seal(secret)) },
    });
    const created = await tx.subscription.create({
      data: {
        secretId,
        id: newId("subscription"),
        url: input.url,
        events: input.events,
        description: input.description ?? "",
        active: input.active ?? true,
        maxInFlight: input.maxInFlight ?? ctx.defaultMaxInFlight,
        rateLimit: input.rateLimit ?? null,
        headers: input.headers ?? {},
        tenantId: input.tenantId ?? null,
        signatureScheme,
        publicKey: keyPair?.publicKey ?? null,
        ordering: input.ordering ?? "none",
        ...credentialData(credentials),
      },
      select: subscriptionFields,
    });
    if (filter === null) return created;
    await writeFilter(tx, created.id, filter);
    return { ...created, filter };
  });
  return { subscription: toSubscriptionRecord(subscription), secret: keyPair ? undefined : secret };
}

function credentialData(columns: CredentialColumns) {
  return {
    credentialsId: columns.credentialsId,
    auth: jsonOrNull(columns.auth),
    clientCertificate: jsonOrNull(columns.clientCertificate),
  };
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`No such subscription: ${id}`, "subscription_id");
}

export async function getSubscription(ctx: ScopedContext, id: string): Promise<SubscriptionRecord> {
  if (!isId("subscription", id)) throw notFound(id);
  const subscription = await ctx.db.subscription.findFirst({
    where: { id, deletedAt: null, ...scopeWhere(ctx.scope) },
    select: subscriptionFields,
  });
  if (!subscription) throw notFound(id);
  return toSubscriptionRecord(subscription);
}

/** Newest first; deleted subscriptions are not listed. */
export async function listSubscriptions(
  ctx: ScopedListContext,
  filters: { tenantId?: string | undefined },
  page: PageRequest,
): Promise<Page<SubscriptionRecord>> {
  const rows = await fetchPage<SubscriptionRow>(ctx.sql, subscriptionListQuery(ctx.scope, filters), page);
  return { data: rows.data.map(toSubscriptionRecord), hasMore: rows.hasMore };
}

/**
 * What listSubscriptions reads (exported for EXPLAIN in tests). With a tenant (scope or filter)
 * the walk is along the partial (tenant_id, created_at, id) index, which `tenant_id = $1` implies.
 */
export function subscriptionListQuery(scope: TenantScope, filters: { tenantId?: string | undefined }): PageQuery {
  const where = [Prisma.sql`deleted_at IS NULL`, ...scopeConditions(scope)];
  if (filters.tenantId !== undefined) where.push(Prisma.sql`tenant_id = ${filters.tenantId}`);
  return {
    table: "subscriptions",
    timeColumn: "created_at",
    columns: subscriptionColumns,
    filters: where,
    resource: "subscription",
    cursorScope: scopeConditions(scope),
  };
}

/**
 * A partial update of url, events, active, max_in_flight, rate_limit, headers, filter, auth,
 * client_certificate and ordering (docs/api.md#update-a-subscription). It changes only the
 * subscription row (and adds a credentials row; events published after it are matched against the
 * new events and filter); deliveries already created keep their own snapshot of url, headers and
 * credentials (docs/api.md#updates-apply-to-the-next-delivery), so an update can never reach them.
 * The limits apply to attempts that start after the change. `active: true` also re-enables a
 * subscription the service disabled and closes its circuit. One exception: `ordering: "none"`
 * releases the deliveries waiting in the subscription's line, in the same transaction
 * (docs/api.md#ordered-delivery); they are returned, for the caller to enqueue after commit.
 */
export async function updateSubscription(
  ctx: ScopedContext & Pick<SubscriptionContext, "destinationPolicy" | "eventTypesStrict" | "secretBox">,
  id: string,
  changes: {
    url?: string | undefined;
    events?: string[] | undefined;
    active?: boolean | undefined;
    maxInFlight?: number | undefined;
    /** null removes the limit; undefined keeps it. */
    rateLimit?: number | null | undefined;
    /** Replaces the whole set; `{}` removes them all. Deliveries already created keep theirs. */
    headers?: Record<string, string> | undefined;
    /** A payload filter the API has checked; null removes it, undefined keeps it. */
    filter?: PayloadFilter | null | undefined;
    /** null removes it; undefined keeps it. */
    auth?: EndpointAuth | null | undefined;
    clientCertificate?: ClientCertificate | null | undefined;
    ordering?: DeliveryOrdering | undefined;
  },
): Promise<{ subscription: SubscriptionRecord; released: string[] }> {
  if (!isId("subscription", id)) throw notFound(id);
  if (changes.url !== undefined) assertDeliverableUrl(changes.url, ctx.destinationPolicy);
  if (changes.events !== undefined && ctx.eventTypesStrict) await assertSubscribableEventTypes(ctx, changes.events);
  const certificateView = checkCredentials(changes, ctx.destinationPolicy, new Date());
  const { filter } = changes;
  const data = {
    url: changes.url,
    events: changes.events,
    active: changes.active,
    maxInFlight: changes.maxInFlight,
    rateLimit: changes.rateLimit,
    headers: changes.headers,
    ordering: changes.ordering,
    ...(changes.active === true ? reenabledHealth : {}),
  };
  const where = { id, deletedAt: null, ...scopeWhere(ctx.scope) };
  if (
    changes.auth === undefined &&
    changes.clientCertificate === undefined &&
    changes.headers === undefined &&
    filter === undefined &&
    changes.ordering !== "none"
  ) {
    const { count } = await ctx.db.subscription.updateMany({ where, data });
    if (count === 0) throw notFound(id);
    return { subscription: await getSubscription(ctx, id), released: [] };
  }
  // Auth, certificate and headers are checked against each other, and a new credentials row
  // carries over the half not sent: read and written under the row's lock, so that two updates
  // at once cannot each drop the other's half.
  const released = await inTransaction(ctx.db, async (tx) => {
    const inScope = Prisma.join([Prisma.sql`TRUE`, ...scopeConditions(ctx.scope)], " AND ");
    const [current] = await tx.$queryRaw<
      {
        credentialsId: string | null;
        headers: Record<string, string>;
        hasAuth: boolean;
        clientCertificate: ClientCertificateView | null;
      }[]
    >`SELECT credentials_id AS "credentialsId", headers, auth IS NOT NULL AS "hasAuth", client_certificate AS "clientCertificate"
      FROM subscriptions WHERE id = ${id} AND deleted_at IS NULL AND ${inScope} FOR UPDATE`;
    if (!current) throw notFound(id);
    assertNoAuthorizationConflict(
      changes.headers ?? current.headers,
      changes.auth === undefined ? current.hasAuth : changes.auth !== null,
    );
    let credentials: CredentialColumns | undefined;
    if (changes.auth !== undefined || changes.clientCertificate !== undefined) {
      const stored = await readCredentials(tx, ctx.secretBox, current.credentialsId);
      credentials = await writeCredentials(
        tx,
        ctx.secretBox,
        {
          auth: changes.auth === undefined ? stored.auth : changes.auth,
          client_certificate:
            changes.clientCertificate === undefined ? stored.client_certificate : changes.clientCertificate,
        },
        changes.clientCertificate === undefined ? current.clientCertificate : (certificateView ?? null),
      );
      // The row replaced stays while deliveries refer to it; the pruner deletes it after.
      if (current.credentialsId !== null) await retireCredentials(tx, current.credentialsId);
    }
    await tx.subscription.updateMany({ where, data: { ...data, ...(credentials ? credentialData(credentials) : {}) } });
    if (filter !== undefined) await writeFilter(tx, id, filter);
    // A publish that read "fifo" just before this commits and this does not see its deliveries:
    // they stay in order, one at a time (a PUT with ordering "none" releases them too).
    return changes.ordering === "none" ? releaseLine(tx, id) : [];
  });
  return { subscription: await getSubscription(ctx, id), released };
}

/**
 * A new signing secret (docs/api.md#rotate-the-signing-secret), or for an ed25519 subscription a
 * new key pair (docs/api.md#signature-schemes). The one it replaces stays valid for `overlapMs` (0
 * for none): until then every attempt, of any delivery, is signed with both (see claimDeliveries).
 * Only one previous secret is kept: rotating again during an overlap ends the older secret's
 * overlap at once, and the secret being replaced gets the new overlap. Returns the new HMAC
 * secret, which is never shown again; an ed25519 subscription's new public key is in the
 * subscription, and its private key is never shown.
 */
export async function rotateSubscriptionSecret(
  ctx: ScopedContext & Pick<SubscriptionContext, "secretBox">,
  id: string,
  input: { overlapMs: number },
): Promise<{ subscription: SubscriptionRecord; secret: string | undefined }> {
  // The scheme never changes, so the key can be made before the statement that stores it.
  const { signatureScheme } = await getSubscription(ctx, id);
  const keyPair = signatureScheme === "ed25519" ? generateSigningKeyPair() : undefined;
  const secret = keyPair?.privateKey ?? generateSigningSecret();
  const secretId = newId("secret");
  const ciphertext = new Uint8Array(ctx.secretBox.seal(secret));
  const inScope = Prisma.join(
    [Prisma.sql`TRUE`, ...scopeConditions(ctx.scope, Prisma.raw("subscriptions.tenant_id"))],
    " AND ",
  );
  // One statement: the new secret row exists only if the subscription does, and a concurrent
  // rotation waits on the row lock, then takes this one's new secret as its previous one.
  const rotated = await ctx.db.$queryRaw<{ id: string }[]>`
    WITH new_secret AS (
      INSERT INTO signing_secrets (id, ciphertext)
      SELECT ${secretId}, ${ciphertext} WHERE EXISTS (SELECT 1 FROM subscriptions WHERE id = ${id} AND deleted_at IS NULL AND ${inScope})
      RETURNING id
    )
    UPDATE subscriptions SET
      previous_secret_id = CASE WHEN ${input.overlapMs}::int > 0 THEN secret_id END,
      previous_secret_expires_at = CASE WHEN ${input.overlapMs}::int > 0 THEN now() + ${input.overlapMs}::int * interval '1 millisecond' END,
      secret_id = new_secret.id,
      public_key = ${keyPair?.publicKey ?? null},
      updated_at = now()
    FROM new_secret
    WHERE subscriptions.id = ${id} AND subscriptions.deleted_at IS NULL AND ${inScope}
    RETURNING subscriptions.id`;
  if (rotated.length === 0) throw notFound(id);
  return { subscription: await getSubscription(ctx, id), secret: keyPair ? undefined : secret };
}

/**
 * Soft delete: no new deliveries; the delivery log, and deliveries already created, stay (and go
 * out). Returns whether the service had disabled it: its deliveries waiting at the workers' gate
 * for it to be enabled again may go now (the caller wakes them).
 */
export async function deleteSubscription(ctx: ScopedContext, id: string): Promise<{ wasDisabled: boolean }> {
  if (!isId("subscription", id)) throw notFound(id);
  const inScope = Prisma.join([Prisma.sql`TRUE`, ...scopeConditions(ctx.scope)], " AND ");
  // Its credentials are retired with it: the pruner deletes them once no delivery refers to them.
  const [deleted] = await ctx.db.$queryRaw<{ wasDisabled: boolean }[]>`
    WITH deleted AS (
      UPDATE subscriptions SET deleted_at = now(), active = false, updated_at = now()
      WHERE id = ${id} AND deleted_at IS NULL AND ${inScope}
      RETURNING disabled_reason IS NOT NULL AS "wasDisabled", credentials_id
    ), retired AS (
      UPDATE endpoint_credentials SET retired_at = now() WHERE id IN (SELECT credentials_id FROM deleted) RETURNING 1
    )
    SELECT "wasDisabled" FROM deleted`;
  if (!deleted) throw notFound(id);
  return deleted;
}
