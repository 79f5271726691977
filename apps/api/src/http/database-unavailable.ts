/** A seconds value for Retry-After while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;
