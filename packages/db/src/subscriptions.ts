import {
  checkDestinationUrl,
  generateSigningSecret,
  isId,
  newId,
  NotFoundError,
  ValidationError,
  type DestinationPolicy,
  type SecretBox,
} from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";
import { fetchPage, type Page, type PageRequest } from "./paging.ts";

export interface SubscriptionContext {
  db: PrismaClientOrTransaction;
  secretBox: SecretBox;
  destinationPolicy: DestinationPolicy;
}

export interface SubscriptionRecord {
  id: string;
  url: string;
  events: string[];
  description: string;
  active: boolean;
  createdAt: Date;
}

const subscriptionFields = { id: true, url: true, events: true, description: true, active: true, createdAt: true } as const;

function assertDeliverableUrl(url: string, policy: DestinationPolicy): void {
  const verdict = checkDestinationUrl(url, policy);
  if (!verdict.ok) throw new ValidationError(`url ${verdict.reason}`, "url_invalid", "url");
}

export async function createSubscription(
  ctx: SubscriptionContext,
  input: { url: string; events: string[]; description?: string | undefined; active?: boolean | undefined },
): Promise<{ subscription: SubscriptionRecord; secret: string }> {
  assertDeliverableUrl(input.url, ctx.destinationPolicy);
  const secret = generateSigningSecret();
  const subscription = await ctx.db.subscription.create({
    data: {
      id: newId("subscription"),
      url: input.url,
      events: input.events,
      description: input.description ?? "",
      active: input.active ?? true,
      secret: { create: { id: newId("secret"), ciphertext: new Uint8Array(ctx.secretBox.seal(secret)) } },
    },
    select: subscriptionFields,
  });
  return { subscription, secret };
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`No such subscription: ${id}`, "subscription_id");
}

export async function getSubscription(ctx: Pick<SubscriptionContext, "db">, id: string): Promise<SubscriptionRecord> {
  if (!isId("subscription", id)) throw notFound(id);
  const subscription = await ctx.db.subscription.findFirst({ where: { id, deletedAt: null }, select: subscriptionFields });
  if (!subscription) throw notFound(id);
  return subscription;
}

export async function listSubscriptions(ctx: Pick<SubscriptionContext, "db">, page: PageRequest): Promise<Page<SubscriptionRecord>> {
  return fetchPage<SubscriptionRecord>(
    ctx.db,
    {
      table: "subscriptions",
      timeColumn: "created_at",
      columns: Prisma.sql`id, url, events, description, active, created_at AS "createdAt"`,
      filters: [Prisma.sql`deleted_at IS NULL`],
      resource: "subscription",
    },
    page,
  );
}

/**
 * Spec §4.2: a partial update of url, events and active. It changes only the subscription row;
 * deliveries already created keep their own snapshot of url and secret (contract §8), so an
 * update can never reach them.
 */
export async function updateSubscription(
  ctx: Pick<SubscriptionContext, "db" | "destinationPolicy">,
  id: string,
  changes: { url?: string | undefined; events?: string[] | undefined; active?: boolean | undefined },
): Promise<SubscriptionRecord> {
  if (!isId("subscription", id)) throw notFound(id);
  if (changes.url !== undefined) assertDeliverableUrl(changes.url, ctx.destinationPolicy);
  const { count } = await ctx.db.subscription.updateMany({
    where: { id, deletedAt: null },
    data: { url: changes.url, events: changes.events, active: changes.active },
  });
  if (count === 0) throw notFound(id);
  return getSubscription(ctx, id);
}

/** Soft delete: no new deliveries; the delivery log, and deliveries already created, stay. */
export async function deleteSubscription(ctx: Pick<SubscriptionContext, "db">, id: string): Promise<void> {
  if (!isId("subscription", id)) throw notFound(id);
  const { count } = await ctx.db.subscription.updateMany({
    where: { id, deletedAt: null },
    data: { deletedAt: new Date(), active: false },
  });
  if (count === 0) throw notFound(id);
}
