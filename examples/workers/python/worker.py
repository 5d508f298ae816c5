"""A settlement worker whose lease is the Python Redis client's own Lock, as a team
would use it.

    .venv/bin/python worker.py              the Lock, a fencing token (incr after the
                                            Lock is acquired; the client sends it as
                                            INCRBY key 1) and the fenced statements
    .venv/bin/python worker.py --no-fence   the Lock alone and the unfenced statements:
                                            a row not updated is skipped
    .venv/bin/python worker.py --token-from-db
                                            fenced, its tokens from the database's
                                            counter (fence_seq) instead of incr: the
                                            article's remedy for a Redis that restarts
                                            and forgets the counter
    .venv/bin/python worker.py --check-after-token
                                            fenced, and the lease read again once the
                                            token is taken (the Lock's owned()): a step
                                            beyond the article's four that closes its
                                            gap (docs/worker.md); goes with
                                            --token-from-db too

The Lock picks its own value for the key (a random hex string) and releases with its own
script; the worker only says which key and for how long. The servers come from FENCESIM_*
variables (see the folder's README); jobs are taken until the queue answers 410. One short
line is written per batch event.
"""

import json
import math
import os
import sys
import time
import urllib.error
import urllib.request

import psycopg
import redis
from redis.exceptions import ConnectionError as RedisDown, LockNotOwnedError, TimeoutError as RedisSlow

# --------------------------------------------------------------------------------------
# Configuration


def env(name: str) -> str:
    value = os.environ.get(name, "")
    if value == "":
        sys.exit(f"worker: {name} is not set")
    return value


def env_int(name: str) -> int:
    text = env(name)
    try:
        value = int(text)
    except ValueError:
        sys.exit(f"worker: {name} must be a whole number, not '{text}'")
    if value < 0:
        sys.exit(f"worker: {name} must be a whole number, not '{text}'")
    return value


FENCED = "--no-fence" not in sys.argv[1:]
TOKEN_FROM_DB = "--token-from-db" in sys.argv[1:]
CHECK_AFTER_TOKEN = "--check-after-token" in sys.argv[1:]
WORKER = env("FENCESIM_WORKER")
REDIS_URL = env("FENCESIM_REDIS_URL")
DATABASE_URL = env("FENCESIM_DATABASE_URL")
GATEWAY = env("FENCESIM_GATEWAY_URL").rstrip("/")
QUEUE = env("FENCESIM_QUEUE_URL").rstrip("/")
LEASE_TTL_MS = env_int("FENCESIM_LEASE_TTL_MS")
POLL_S = max(1, env_int("FENCESIM_POLL_MS")) / 1000

# every HTTP request and every Redis reply is waited for this long: the run says how long
# (5 s in real time, far longer when each request waits for its turn on the run's clock)
TIMEOUT_S = (env_int("FENCESIM_TIMEOUT_MS") if os.environ.get("FENCESIM_TIMEOUT_MS") else 5000) / 1000
GATEWAY_TRIES = 6  # tries for a gateway that is down (503) or gives no answer (504)
CONFLICT_BUDGET_S = max(10.0, 4 * LEASE_TTL_MS / 1000)  # how long a 409 is retried
QUEUE_UNREACHABLE_S = 10.0  # how long the queue may stay unreachable


def lock_seconds(ms: int) -> float:
    """The float timeout the Lock turns back into exactly `ms` milliseconds.

    The Lock sends PX int(timeout * 1000), which truncates: 1.001 * 1000 is
    1000.9999999999999, so timeout=1.001 would send PX 1000. The smallest float at or
    above ms / 1000 that gives `ms` back is used instead.
    """
    seconds = ms / 1000
    while int(seconds * 1000) < ms:
        seconds = math.nextafter(seconds, math.inf)
    return seconds


def log(line: str) -> None:
    print(f"{WORKER}: {line}", flush=True)


# --------------------------------------------------------------------------------------
# The writes: bound parameters in PostgreSQL's own $n form (a raw cursor), autocommit

OPEN_ROWS = """SELECT id, amount_cents, state, fence
                 FROM refund
                WHERE merchant = $1 AND state <> 'sent'
                ORDER BY id"""

CLAIM = """UPDATE refund
              SET state = 'sending', fence = $1
            WHERE id = $2
              AND state IN ('pending', 'sending')
              AND fence < $1"""

CONFIRM = """UPDATE refund
                SET state = 'sent'
              WHERE id = $2 AND state = 'sending' AND fence = $1"""

CLAIM_UNFENCED = """UPDATE refund
                       SET state = 'sending'
                     WHERE id = $1
                       AND state IN ('pending', 'sending')"""

CONFIRM_UNFENCED = """UPDATE refund
                         SET state = 'sent'
                       WHERE id = $1 AND state = 'sending'"""


NEXT_TOKEN = """INSERT INTO fence_seq (merchant, value) VALUES ($1, 1)
                  ON CONFLICT (merchant) DO UPDATE SET value = fence_seq.value + 1
              RETURNING value"""


def next_token_from_db(db: psycopg.Connection, merchant: int) -> int:
    """The next token for `merchant` from the database's own counter, kept with the rows."""
    return db.execute(NEXT_TOKEN, (merchant,)).fetchone()[0]


class FenceViolation(Exception):
    def __init__(self, refund_id: int, token: int, write: str):
        super().__init__(f"fence violation: {write} of r_{refund_id} with token {token} updated no row")


def claim_refund(db: psycopg.Connection, refund_id: int, token: int) -> None:
    if db.execute(CLAIM, (token, refund_id)).rowcount == 0:
        raise FenceViolation(refund_id, token, "claim")


def confirm_refund(db: psycopg.Connection, refund_id: int, token: int) -> None:
    if db.execute(CONFIRM, (token, refund_id)).rowcount == 0:
        raise FenceViolation(refund_id, token, "confirm")


def claim_refund_unfenced(db: psycopg.Connection, refund_id: int) -> bool:
    return db.execute(CLAIM_UNFENCED, (refund_id,)).rowcount != 0


def confirm_refund_unfenced(db: psycopg.Connection, refund_id: int) -> bool:
    return db.execute(CONFIRM_UNFENCED, (refund_id,)).rowcount != 0


# --------------------------------------------------------------------------------------
# HTTP: the queue and the gateway

# No proxy from the environment: every server is on loopback.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(method: str, url: str, body=None):
    """(status, parsed body), or None when no answer came (refused, reset, timed out)."""
    data = b"" if method == "POST" else None
    headers = {}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with OPENER.open(req, timeout=TIMEOUT_S) as res:
            status, text = res.status, res.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    except (urllib.error.URLError, OSError):
        return None
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return status, parsed


def take_job():
    """A job, "none" (ask again after the poll time) or "over" (410)."""
    failing_since = time.monotonic()
    while True:
        answer = request("POST", f"{QUEUE}/take")
        status = answer[0] if answer else None
        if status == 200:
            return answer[1]
        if status == 204:
            return "none"
        if status == 410:
            return "over"
        if time.monotonic() - failing_since > QUEUE_UNREACHABLE_S:
            raise RuntimeError(f"the queue at {QUEUE} answers {status or 'nothing'}")
        time.sleep(POLL_S)


def ack_job(job) -> str:
    answer = request("POST", f"{QUEUE}/ack", {"receipt": job["receipt"]})
    if not answer or answer[0] != 200:
        return f"ack not taken ({answer[0] if answer else 'no answer'})"
    if isinstance(answer[1], dict) and answer[1].get("accepted") is True:
        return "acked"
    return "ack refused (the job was handed to another worker)"


class GatewayGaveUp(Exception):
    pass


def look_up(refund_id: int):
    """The gateway's receipt for this reference, or None; retried while it cannot say."""
    wait = POLL_S
    for _ in range(GATEWAY_TRIES):
        answer = request("GET", f"{GATEWAY}/refunds/{refund_id}")
        if answer and answer[0] == 200:
            return answer[1]
        if answer and answer[0] == 404:
            return None
        time.sleep(wait)
        wait *= 2
    raise GatewayGaveUp(f"lookup of r_{refund_id}: the gateway could not say")


def pay(refund_id: int, amount_cents: int):
    """Pays the refund under its idempotency key: the receipt, or GatewayGaveUp."""
    call = {"reference": refund_id, "key": f"r_{refund_id}", "amount": amount_cents}
    conflicts_until = time.monotonic() + CONFLICT_BUDGET_S
    wait = POLL_S
    tries = 0
    while True:
        answer = request("POST", f"{GATEWAY}/refunds", call)
        status = answer[0] if answer else None
        if status == 200:
            return answer[1]
        if status == 409:
            # another call with this key is in flight: its answer decides, ask again shortly
            if time.monotonic() > conflicts_until:
                raise GatewayGaveUp(f"r_{refund_id}: key still in flight")
            time.sleep(2 * POLL_S)
            continue
        tries += 1
        if status == 503:
            if tries >= GATEWAY_TRIES:
                raise GatewayGaveUp(f"r_{refund_id}: the gateway is down")
            time.sleep(wait)
            wait *= 2
            continue
        if status in (504, None):
            # the payment may or may not have happened: look it up, pay again only if not found
            time.sleep(POLL_S)
            found = look_up(refund_id)
            if found is not None:
                return found
            if tries >= GATEWAY_TRIES:
                raise GatewayGaveUp(f"r_{refund_id}: outcome unknown")
            continue
        raise GatewayGaveUp(f"r_{refund_id}: the gateway answered {status}")


# --------------------------------------------------------------------------------------
# The batch


def release(lock) -> str:
    try:
        lock.release()
        return "lease released"
    except LockNotOwnedError:
        return "lease already gone at release (LockNotOwnedError)"
    except (RedisDown, RedisSlow) as error:
        return f"lease not released, Redis unreachable ({error})"


def settle(db: psycopg.Connection, r: redis.Redis, job) -> None:
    merchant = job["merchant"]
    name = f"job {job['job']} m_{merchant}"

    # 1. Acquire the lease: the Lock sends SET key <its token> NX PX <ms>
    lock = r.lock(f"lock:settle:m_{merchant}", timeout=lock_seconds(LEASE_TTL_MS), blocking=False)
    try:
        if not lock.acquire():
            log(f"{name}: lease busy")
            return
    except (RedisDown, RedisSlow) as error:
        # Redis restarting: leave the job to the queue; the client connects again next time
        log(f"{name}: Redis unreachable ({error}): job left to the queue")
        return

    try:
        # 2. Take the token, kept for the whole batch (on the wire: INCRBY key 1)
        if not FENCED:
            token = 0
        elif TOKEN_FROM_DB:
            token = next_token_from_db(db, merchant)
        else:
            token = r.incr(f"fence:settle:m_{merchant}")
        # (beyond the article) a lease that ended before the token was taken is no longer
        # ours, and the token may be newer than the next holder's: give the batch up (the
        # Lock's owned() reads the key and compares it with its own token)
        if CHECK_AFTER_TOKEN and not lock.owned():
            log(f"{name}: the lease ended before the token was taken: batch abandoned")
            return
        rows = db.execute(OPEN_ROWS, (merchant,)).fetchall()
        log(f"{name}: lease taken" + (f", token {token}" if FENCED else "") + f", {len(rows)} open rows")

        # 3. Claim before the side effect, pay, confirm with the same token
        settled = 0
        for refund_id, amount_cents, state, _fence in rows:
            # a row left in 'sending' may mean a call already went out: ask before paying
            paid = look_up(refund_id) if state == "sending" else None
            if FENCED:
                claim_refund(db, refund_id, token)
            elif not claim_refund_unfenced(db, refund_id):
                continue
            if paid is None:
                pay(refund_id, amount_cents)
            if FENCED:
                confirm_refund(db, refund_id, token)
            elif not confirm_refund_unfenced(db, refund_id):
                continue
            settled += 1

        # 4. Every row done: ack, then release
        log(f"{name}: {settled} rows settled, {ack_job(job)}, {release(lock)}")
    except (FenceViolation, GatewayGaveUp, RedisDown, RedisSlow) as error:
        log(f"{name}: {error}: batch abandoned, {release(lock)}")


def main() -> None:
    db = psycopg.connect(DATABASE_URL, autocommit=True, cursor_factory=psycopg.RawCursor)
    r = redis.Redis.from_url(REDIS_URL, socket_timeout=TIMEOUT_S)
    log(f"started ({'fenced' if FENCED else 'no fence'}, lease {LEASE_TTL_MS} ms)")
    while True:
        taken = take_job()
        if taken == "over":
            break
        if taken == "none":
            time.sleep(POLL_S)
            continue
        settle(db, r, taken)
    log("the run is over")
    db.close()
    r.close()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as error:  # anything else ends the program, loudly
        print(f"{WORKER}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
