// The article's settlement worker: a Redis lease with a TTL, a fencing token from INCR,
// and the two fenced UPDATEs that make the database turn a stale holder away.
//
//   node dist/worker.js              the article's worker (lease + token + fenced writes)
//   node dist/worker.js --no-fence   the same worker with the fence taken out: no INCR,
//                                    the unfenced statements, a row not updated is skipped
//   node dist/worker.js --token-from-db
//                                    fenced, its tokens from the database's counter
//                                    (fence_seq) instead of INCR: the article's remedy for
//                                    a Redis that restarts and forgets the counter
//   node dist/worker.js --check-after-token
//                                    fenced, and the lease read again once the token is
//                                    taken: a step beyond the article's four, which closes
//                                    its gap (a lease that ends before the token is taken;
//                                    docs/worker.md); goes with --token-from-db too
//
// It reads its servers from FENCESIM_* variables (see the folder's README), takes jobs
// from the queue until the queue answers 410, and writes one short line per batch event.

import { randomBytes } from "node:crypto";
import Redis from "ioredis";
import { Client } from "pg";

// ---------------------------------------------------------------------------------------
// Configuration

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    console.error(`worker: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

function envInt(name: string): number {
  const text = env(name);
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`worker: ${name} must be a whole number, not '${text}'`);
    process.exit(2);
  }
  return value;
}

const FENCED = !process.argv.slice(2).includes("--no-fence");
const TOKEN_FROM_DB = process.argv.slice(2).includes("--token-from-db");
const CHECK_AFTER_TOKEN = process.argv.slice(2).includes("--check-after-token");
const WORKER = env("FENCESIM_WORKER");
const REDIS_URL = env("FENCESIM_REDIS_URL");
const DATABASE_URL = env("FENCESIM_DATABASE_URL");
const GATEWAY = env("FENCESIM_GATEWAY_URL").replace(/\/+$/, "");
const QUEUE = env("FENCESIM_QUEUE_URL").replace(/\/+$/, "");
const LEASE_TTL_MS = envInt("FENCESIM_LEASE_TTL_MS");
const POLL_MS = Math.max(1, envInt("FENCESIM_POLL_MS"));

/** Every HTTP request is bounded by this: the run says how long (5 s in real time, far
 * longer when each request waits for its turn on the run's clock). */
const HTTP_TIMEOUT_MS = process.env.FENCESIM_TIMEOUT_MS ? envInt("FENCESIM_TIMEOUT_MS") : 5_000;
/** Tries for a gateway that is down (503) or gives no answer (504) before the batch is abandoned. */
const GATEWAY_TRIES = 6;
/** How long a refund call answered 409 (same key in flight) is retried. */
const CONFLICT_BUDGET_MS = Math.max(10_000, 4 * LEASE_TTL_MS);
/** How long the queue may stay unreachable before the worker gives up. */
const QUEUE_UNREACHABLE_MS = 10_000;

const RELEASE_SCRIPT =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

function log(line: string): void {
  console.log(`${WORKER}: ${line}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// ---------------------------------------------------------------------------------------
// The fenced writes, as the article writes them (db.query for its db.execute)

type Db = Client;

class FenceViolation extends Error {
  constructor(
    readonly refundId: string,
    readonly token: number,
    readonly write: "claim" | "confirm",
  ) {
    super(`fence violation: ${write} of r_${refundId} with token ${token} updated no row`);
  }
}

async function claimRefund(db: Db, refundId: string, token: number) {
  const res = await db.query(
    `UPDATE refund
        SET state = 'sending', fence = $1
      WHERE id = $2
        AND state IN ('pending', 'sending')
        AND fence < $1`,
    [token, refundId],
  );
  if (res.rowCount === 0) throw new FenceViolation(refundId, token, "claim");
}

async function confirmRefund(db: Db, refundId: string, token: number) {
  const res = await db.query(
    `UPDATE refund
        SET state = 'sent'
      WHERE id = $2 AND state = 'sending' AND fence = $1`,
    [token, refundId],
  );
  if (res.rowCount === 0) throw new FenceViolation(refundId, token, "confirm");
}

/** The next token for `merchant` from the database's own counter, kept with the rows. */
async function nextTokenFromDb(db: Db, merchant: number): Promise<number> {
  const res = await db.query(
    `INSERT INTO fence_seq (merchant, value) VALUES ($1, 1)
         ON CONFLICT (merchant) DO UPDATE SET value = fence_seq.value + 1
     RETURNING value`,
    [merchant],
  );
  return Number(res.rows[0].value);
}

// The same writes with the fence conditions removed: the naive code. A row that was not
// updated is skipped (false) and the batch goes on with the next one.

async function claimRefundUnfenced(db: Db, refundId: string): Promise<boolean> {
  const res = await db.query(
    `UPDATE refund
        SET state = 'sending'
      WHERE id = $1
        AND state IN ('pending', 'sending')`,
    [refundId],
  );
  return res.rowCount !== 0;
}

async function confirmRefundUnfenced(db: Db, refundId: string): Promise<boolean> {
  const res = await db.query(
    `UPDATE refund
        SET state = 'sent'
      WHERE id = $1 AND state = 'sending'`,
    [refundId],
  );
  return res.rowCount !== 0;
}

interface OpenRow {
  id: string; // BIGINT comes back from the driver as a string
  amount_cents: string;
  state: string;
  fence: string;
}

async function openRefunds(db: Db, merchant: number): Promise<OpenRow[]> {
  const res = await db.query<OpenRow>(
    `SELECT id, amount_cents, state, fence
       FROM refund
      WHERE merchant = $1 AND state <> 'sent'
      ORDER BY id`,
    [merchant],
  );
  return res.rows;
}

// ---------------------------------------------------------------------------------------
// HTTP: the queue and the gateway

interface Answer {
  status: number;
  body: any;
}

/** The answer, or null when none came (refused, reset, or no answer within the timeout). */
async function request(method: "GET" | "POST", url: string, body?: unknown): Promise<Answer | null> {
  try {
    const res = await fetch(url, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? (method === "POST" ? "" : undefined) : JSON.stringify(body),
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
    const text = await res.text();
    let parsed: any = null;
    if (text !== "") {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, body: parsed };
  } catch {
    return null;
  }
}

interface Job {
  job: number;
  merchant: number;
  receipt: number;
}

type Take = { kind: "job"; job: Job } | { kind: "none" } | { kind: "over" };

async function takeJob(): Promise<Take> {
  const failingSince = Date.now();
  for (;;) {
    const answer = await request("POST", `${QUEUE}/take`);
    if (answer?.status === 200) return { kind: "job", job: answer.body as Job };
    if (answer?.status === 204) return { kind: "none" };
    if (answer?.status === 410) return { kind: "over" };
    if (Date.now() - failingSince > QUEUE_UNREACHABLE_MS) {
      throw new Error(`the queue at ${QUEUE} answers ${answer ? answer.status : "nothing"}`);
    }
    await sleep(POLL_MS);
  }
}

async function ackJob(job: Job): Promise<string> {
  const answer = await request("POST", `${QUEUE}/ack`, { receipt: job.receipt });
  if (answer?.status !== 200) return `ack not taken (${answer ? answer.status : "no answer"})`;
  return answer.body?.accepted === true ? "acked" : "ack refused (the job was handed to another worker)";
}

/** Why a batch stops short because of the gateway. */
class GatewayGaveUp extends Error {}

interface Receipt {
  gateway_ref: number;
  amount: number;
}

/** The gateway's receipt for this reference, or null when it has none; retried while it cannot say. */
async function lookUp(refundId: string): Promise<Receipt | null> {
  let wait = POLL_MS;
  for (let attempt = 1; attempt <= GATEWAY_TRIES; attempt++) {
    const answer = await request("GET", `${GATEWAY}/refunds/${refundId}`);
    if (answer?.status === 200) return answer.body as Receipt;
    if (answer?.status === 404) return null;
    await sleep(wait);
    wait *= 2;
  }
  throw new GatewayGaveUp(`lookup of r_${refundId}: the gateway could not say`);
}

/** Pays the row under its idempotency key; the receipt, or GatewayGaveUp. */
async function pay(row: OpenRow): Promise<Receipt> {
  const call = { reference: Number(row.id), key: `r_${row.id}`, amount: Number(row.amount_cents) };
  const conflictsUntil = Date.now() + CONFLICT_BUDGET_MS;
  let wait = POLL_MS;
  let tries = 0;
  for (;;) {
    const answer = await request("POST", `${GATEWAY}/refunds`, call);
    const status = answer ? answer.status : 0;
    if (status === 200) return answer!.body as Receipt;
    if (status === 409) {
      // another call with this key is in flight: its answer decides, ask again shortly
      if (Date.now() > conflictsUntil) throw new GatewayGaveUp(`r_${row.id}: key still in flight`);
      await sleep(2 * POLL_MS);
      continue;
    }
    tries += 1;
    if (status === 503) {
      if (tries >= GATEWAY_TRIES) throw new GatewayGaveUp(`r_${row.id}: the gateway is down`);
      await sleep(wait);
      wait *= 2;
      continue;
    }
    if (status === 504 || status === 0) {
      // the payment may or may not have happened: look it up, pay again only if not found
      await sleep(POLL_MS);
      const found = await lookUp(row.id);
      if (found) return found;
      if (tries >= GATEWAY_TRIES) throw new GatewayGaveUp(`r_${row.id}: outcome unknown`);
      continue;
    }
    throw new GatewayGaveUp(`r_${row.id}: the gateway answered ${status}`);
  }
}

// ---------------------------------------------------------------------------------------
// The batch: the article's four steps

async function release(redis: Redis, key: string, value: string): Promise<string> {
  const deleted = await redis.eval(RELEASE_SCRIPT, 1, key, value);
  return deleted === 1 ? "lease released" : "lease already gone at release";
}

async function settle(db: Db, redis: Redis, job: Job): Promise<void> {
  const name = `job ${job.job} m_${job.merchant}`;
  const lockKey = `lock:settle:m_${job.merchant}`;
  const fenceKey = `fence:settle:m_${job.merchant}`;
  const value = `${WORKER}:${randomBytes(8).toString("hex")}`;

  // 1. Acquire the lease (SET key value PX ttl NX: the client's typed order of the options)
  const acquired = await redis.set(lockKey, value, "PX", LEASE_TTL_MS, "NX");
  if (acquired !== "OK") {
    log(`${name}: lease busy`);
    return;
  }

  try {
    // 2. Take the token, kept for the whole batch
    const token = !FENCED ? 0 : TOKEN_FROM_DB ? await nextTokenFromDb(db, job.merchant) : await redis.incr(fenceKey);
    // (beyond the article) a lease that ended before the token was taken is no longer
    // ours, and the token may be newer than the next holder's: give the batch up
    if (CHECK_AFTER_TOKEN && (await redis.get(lockKey)) !== value) {
      log(`${name}: the lease ended before the token was taken: batch abandoned`);
      return;
    }
    const rows = await openRefunds(db, job.merchant);
    log(`${name}: lease taken${FENCED ? `, token ${token}` : ""}, ${rows.length} open rows`);

    // 3. Claim before the side effect, pay, confirm with the same token
    let settled = 0;
    for (const row of rows) {
      // a row left in 'sending' may mean a call already went out: ask before paying
      const paid = row.state === "sending" ? await lookUp(row.id) : null;
      if (FENCED) {
        await claimRefund(db, row.id, token);
      } else if (!(await claimRefundUnfenced(db, row.id))) {
        continue;
      }
      if (!paid) await pay(row);
      if (FENCED) {
        await confirmRefund(db, row.id, token);
      } else if (!(await confirmRefundUnfenced(db, row.id))) {
        continue;
      }
      settled += 1;
    }

    // 4. Every row done: ack, then release
    log(`${name}: ${settled} rows settled, ${await ackJob(job)}, ${await release(redis, lockKey, value)}`);
  } catch (error) {
    if (error instanceof FenceViolation || error instanceof GatewayGaveUp) {
      log(`${name}: ${error.message}: batch abandoned, ${await release(redis, lockKey, value)}`);
      return;
    }
    throw error;
  }
}

async function main(): Promise<void> {
  const db = new Client({ connectionString: DATABASE_URL });
  db.on("error", (error) => {
    console.error(`${WORKER}: the database connection failed: ${error.message}`);
    process.exit(1);
  });
  await db.connect();
  const redis = new Redis(REDIS_URL);
  log(`started (${FENCED ? "fenced" : "no fence"}, lease ${LEASE_TTL_MS} ms)`);

  for (;;) {
    const taken = await takeJob();
    if (taken.kind === "over") break;
    if (taken.kind === "none") {
      await sleep(POLL_MS);
      continue;
    }
    await settle(db, redis, taken.job);
  }

  log("the run is over");
  await db.end();
  await redis.quit();
}

// Leave at once: an idle keep-alive connection of the HTTP client would hold the process.
main().then(() => process.exit(0)).catch((error) => {
  console.error(`${WORKER}: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
