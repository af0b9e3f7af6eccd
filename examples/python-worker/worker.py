#!/usr/bin/env python3
"""A stint worker in plain Python 3, standard library only: the worker protocol
(docs/worker-protocol.md) spoken from outside Go.

It registers with the handler kinds it serves (py.echo, py.fail, py.sleep) and takes command
and shell jobs; keeps one lease long poll outstanding for its free slots (max 0 when full, so
cancel and drain pushes still arrive); heartbeats every held lease (run id and fencing token)
once per interval, completing `cancel`led attempts as cancelled and killing `lost` ones
without completing them; runs commands in their own process group with the job's env and the
STINT_* variables, under the job's timeout; streams stdout/stderr as log chunks numbered per
attempt, all sent before the completion (status and exit code); registers again on a 404;
and on SIGTERM/SIGINT or a server drain stops leasing, lets attempts finish, then exits.

Usage: python3 worker.py --server http://127.0.0.1:8080 [--token T] [--id ID] [--slots N]
"""
import argparse, codecs, contextlib, http.client, json, os, random, re, secrets, signal, socket
import subprocess, sys, threading, time, urllib.parse

KILL_GRACE = 10.0   # seconds between SIGTERM and SIGKILL
POLL_WAIT = 30      # seconds the server may hold a lease poll


def log(msg):
    t = time.time()
    stamp = time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"
    print(stamp, "py-worker:", msg, file=sys.stderr, flush=True)


def parse_duration(s):
    """Seconds in a Go duration string such as "3s", "1m30s", "250ms"."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([\d.]+)(h|ms|m|s|us|µs|ns)", s or "")
    return sum(float(n) * units[u] for n, u in parts)


class HTTPError(Exception):
    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


ERRORS = (HTTPError, OSError, http.client.HTTPException, ValueError)


def transient(e):
    """Whether the same request may succeed later (a 4xx other than 408 and 429 will not)."""
    return not isinstance(e, HTTPError) or e.status >= 500 or e.status in (408, 429)


# ---- handler kinds: each gets the task and returns normally (success) or raises (failure) ----

def py_echo(task):
    task.stdout(json.dumps(task.args) + "\n")

def py_fail(task):
    task.stderr("py.fail: failing on purpose\n")
    raise RuntimeError("py.fail always fails")

def py_sleep(task):  # a handler that honours stops: task.stopped is set on cancel/timeout/lost
    if task.stopped.wait(float(task.args.get("seconds", 60))):
        raise RuntimeError("stopped")

HANDLERS = {"py.echo": py_echo, "py.fail": py_fail, "py.sleep": py_sleep}


class Attempt:
    """One leased run on this worker."""

    def __init__(self, worker, lease):
        self.w, self.lease = worker, lease
        self.run_id, self.token = lease["run_id"], lease["token"]
        self.args = lease.get("args") or {}
        self.reason = None             # why it was stopped: cancel, timeout, shutdown, lost
        self.stopped = threading.Event()
        self.proc = None
        self.seq = 0
        self.mu = threading.Lock()
        self.renewed = time.monotonic()  # when the lease was last known valid
        self.finished = self.released = False

    # output -> log chunks, numbered per attempt; the shipper sends them in order
    def emit(self, stream, text):
        if text and not self.lost:
            with self.mu:
                self.seq += 1
                # the lease token proves the chunk is this attempt's (the server refuses others)
                self.w.ship({"run_id": self.run_id, "attempt": self.lease["attempt"], "token": self.token,
                             "seq": self.seq, "stream": stream, "data": text})

    def stdout(self, text): self.emit("stdout", text)
    def stderr(self, text): self.emit("stderr", text)

    @property
    def lost(self): return self.reason == "lost"

    def stop(self, reason):
        """Stop for cancel, timeout, shutdown (SIGTERM, SIGKILL after the grace) or lost (SIGKILL)."""
        with self.mu:
            if self.reason is not None and reason != "lost":
                return
            first, self.reason = self.reason is None, reason
            self.stopped.set()
            if self.proc is None or self.proc.returncode is not None:
                return
            pgid = self.proc.pid
        if reason == "lost":
            self.signal(pgid, signal.SIGKILL)
        elif first:
            self.signal(pgid, signal.SIGTERM)
            t = threading.Timer(KILL_GRACE, self.signal, (pgid, signal.SIGKILL))
            t.daemon = True
            t.start()

    def signal(self, pgid, sig):
        with self.mu, contextlib.suppress(ProcessLookupError):
            if self.proc is not None and self.proc.returncode is None:
                os.killpg(pgid, sig)

    def run(self):
        timeout = parse_duration(self.lease.get("timeout"))
        timer = threading.Timer(timeout, self.stop, ("timeout",)) if timeout > 0 else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            status, code, err = self.run_handler() if self.lease.get("handler") else self.run_command()
        except Exception as e:  # a bug here must not leave the lease held for ever
            status, code, err = "failed", None, f"worker error: {e}"
        if timer:
            timer.cancel()
        if self.reason == "cancel":
            status, err = "cancelled", "cancelled"
        elif self.reason == "timeout":
            status, err = "timed_out", f"timed out after {self.lease['timeout']}"
        elif self.reason == "shutdown":
            status, err = "lost", "worker shutting down: attempt stopped"
        if not self.lost:
            c = {"run_id": self.run_id, "token": self.token, "status": status}
            if code is not None:
                c["exit_code"] = code
            if err:
                c["error"] = err
            self.w.ship(c, completion=self)
        self.w.attempt_done(self, finished=True)

    def run_handler(self):
        fn = HANDLERS.get(self.lease["handler"])
        if fn is None:
            return "failed", None, f"no handler for kind {self.lease['handler']!r} on this worker"
        try:
            fn(self)
            return "succeeded", None, None
        except Exception as e:
            return "failed", None, str(e) or "handler failed"

    def run_command(self):
        l = self.lease
        argv = l.get("command") or ["/bin/sh", "-c", l.get("shell", "")]
        env = dict(os.environ)
        env.update(l.get("env") or {})
        env.update(l.get("secret_env") or {})  # in clear for this attempt only: never log them
        env.update(STINT_RUN_ID=self.run_id, STINT_ATTEMPT=str(l["attempt"]), STINT_JOB=l["job_name"],
                   STINT_JOB_ID=l["job_id"],
                   STINT_ARGS=json.dumps(self.args, separators=(",", ":"), ensure_ascii=False))
        with self.mu:
            if self.reason is not None:  # stopped before it started
                return "failed", None, "stopped before start"
            try:  # start_new_session: its own session and process group, pgid == pid
                self.proc = subprocess.Popen(argv, env=env, cwd=l.get("dir") or None, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             start_new_session=True)
            except OSError as e:
                return "failed", None, f"start: {e}"
        readers = [threading.Thread(target=self.pump, args=(f, s), daemon=True)
                   for f, s in ((self.proc.stdout, "stdout"), (self.proc.stderr, "stderr"))]
        for t in readers:
            t.start()
        pid = self.proc.pid
        # Wait without reaping (Linux): while the leader is a zombie its pid stays the group's
        # id, so the group can be killed without hitting another process.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        with self.mu, contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # leftover children would outlive the attempt
        with self.mu:
            rc = self.proc.wait()
        for t, f in zip(readers, (self.proc.stdout, self.proc.stderr)):
            t.join(2.0)  # a process that left the group may still hold the pipe: leave it
            if not t.is_alive():
                f.close()
        if rc >= 0:
            return ("succeeded" if rc == 0 else "failed"), rc, (f"exit status {rc}" if rc else None)
        return "failed", None, f"signal: {signal.strsignal(-rc).lower()}"

    def pump(self, f, stream):
        dec = codecs.getincrementaldecoder("utf-8")("replace")  # never split a character
        while True:
            b = os.read(f.fileno(), 64 << 10)
            self.emit(stream, dec.decode(b, final=not b))
            if not b:
                return


class Worker:
    def __init__(self, opts):
        u = urllib.parse.urlsplit(opts.server)
        self.host, self.https = u.netloc, u.scheme == "https"
        self.base = u.path.rstrip("/")
        self.token, self.id, self.slots, self.cpu = opts.token, opts.id, opts.slots, opts.cpu
        self.drain_timeout = opts.drain_timeout
        self.mu = threading.Lock()
        self.attempts = {}           # run id -> Attempt: leases held (completion not delivered)
        self.active = set()          # attempts holding a slot (running, or lease still held)
        self.outbox, self.outbox_cv = [], threading.Condition()
        self.draining = threading.Event()   # stop leasing
        self.quit = threading.Event()       # stop the background loops
        self.poll_conn = None        # the outstanding lease poll, to abort it
        self.poll_max, self.poll_aborted = 0, False
        self.reg_lock, self.gen = threading.Lock(), 0
        self.hb_interval, self.ttl = 3.0, 15.0

    # ---- HTTP ----
    def call(self, method, path, body=None, timeout=30.0, poll=False):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, timeout=timeout)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if poll:
            conn.connect()
            with self.mu:
                if self.poll_aborted:  # a slot freed or a drain began since max was computed
                    conn.close()
                    return {"leases": []}
                self.poll_conn = conn
        try:
            conn.request(method, self.base + path, json.dumps(body) if body is not None else None, headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status >= 300:  # a problem: {"title", "status", "detail", "errors"}
                raise HTTPError(resp.status, data.decode(errors="replace")[:300])
            return json.loads(data) if data else None
        finally:
            if poll:
                with self.mu:
                    self.poll_conn = None
            conn.close()

    def abort_poll_locked(self):
        self.poll_aborted = True
        if self.poll_conn is not None and self.poll_conn.sock is not None:
            with contextlib.suppress(OSError):
                self.poll_conn.sock.shutdown(socket.SHUT_RDWR)

    def register(self, gen=None):
        """Register (again: a new session) unless another thread did since gen was read."""
        with self.reg_lock:
            if gen is not None and gen != self.gen:
                return
            self.register_locked()

    def register_locked(self):
        body = {"id": self.id, "capacity": {"cpu": self.cpu, "memory_mb": 0, "gpu": 0, "slots": self.slots},
                "handlers": sorted(HANDLERS), "commands": True}
        delay = 0.1
        while not self.quit.is_set() and not self.draining.is_set():
            try:
                r = self.call("POST", "/v1/workers/register", body)
                self.id = r["worker"]["id"]
                self.hb_interval = parse_duration(r["heartbeat_interval"]) or 3.0
                self.ttl = parse_duration(r["lease_ttl"]) or 15.0
                self.gen += 1
                log(f"registered as {self.id} (heartbeat {self.hb_interval}s, lease ttl {self.ttl}s)")
                return
            except ERRORS as e:
                if not transient(e):
                    log(f"register refused for good: {e}")
                    return self.drain()
                log(f"register failed: {e}; retrying")
            self.quit.wait(delay)
            delay = min(delay * 2, 5.0)

    # ---- leasing ----
    def lease_loop(self):
        delay = 0.1
        while not self.draining.is_set():
            with self.mu:
                free = max(self.slots - len(self.active), 0)
                self.poll_max, self.poll_aborted = free, False
            gen = self.gen
            try:
                r = self.call("POST", f"/v1/workers/{self.id}/lease",
                              {"max": free, "wait": f"{POLL_WAIT}s"}, timeout=POLL_WAIT + 15, poll=True)
                delay = 0.1
            except ERRORS as e:
                if getattr(e, "status", 0) == 404:
                    self.register(gen)  # the server forgot us: a new session
                elif not self.poll_aborted:  # not an abort of ours
                    log(f"lease poll failed: {e}")
                    self.draining.wait(delay)
                    delay = min(delay * 2, 5.0)
                continue
            # lost names leases held before this answer; a run may also be leased again in
            # it (its old lease expired): kill the old attempt first, then start the new one.
            self.apply(r.get("lost"), None, None)
            for lease in r.get("leases") or []:
                at = Attempt(self, lease)
                with self.mu:
                    old = self.attempts.get(at.run_id)
                    self.attempts[at.run_id] = at
                    self.active.add(at)
                if old:  # leased again: the old lease is gone
                    log(f"{at.run_id} was leased again: killing its old attempt")
                    old.stop("lost")
                    self.attempt_done(old, released=True)
                threading.Thread(target=at.run, daemon=True).start()
            self.apply(None, r.get("cancel"), r.get("drain"))

    def apply(self, lost, cancel, drain):
        for run_id in lost or []:
            at = self.attempts.get(run_id)
            if at:
                log(f"lease of {run_id} lost: killing it")
                at.stop("lost")
                self.attempt_done(at, released=True)
        for run_id in cancel or []:
            at = self.attempts.get(run_id)
            if at:
                at.stop("cancel")
        if drain and not self.draining.is_set():
            log("server asked to drain")
            self.drain()

    def attempt_done(self, at, finished=False, released=False):
        with self.mu:
            at.finished |= finished
            at.released |= released
            if at.released and self.attempts.get(at.run_id) is at:
                del self.attempts[at.run_id]
            if at.finished and at.released and at in self.active:
                self.active.discard(at)
                if self.poll_max == 0:
                    self.abort_poll_locked()  # a slot freed: ask again with max > 0

    # ---- heartbeats ----
    def heartbeat_loop(self):
        wait = self.hb_interval
        while not self.quit.wait(wait):
            with self.mu:
                held = list(self.attempts.values())
            start, gen, wait = time.monotonic(), self.gen, min(1.0, self.hb_interval)  # retry soon
            try:
                r = self.call("POST", f"/v1/workers/{self.id}/heartbeat",
                              {"held": [{"run_id": a.run_id, "token": a.token} for a in held]},
                              timeout=max(self.hb_interval, 1.0))
                wait = self.hb_interval
                for a in held:
                    a.renewed = start
                self.apply(r.get("lost"), r.get("cancel"), r.get("drain"))
            except ERRORS as e:
                log(f"heartbeat failed: {e}")
                if getattr(e, "status", 0) == 404:
                    self.register(gen)
            for a in held:  # a lease not renewed for a whole TTL is someone else's by now
                if time.monotonic() - a.renewed >= self.ttl and not a.released:
                    log(f"lease of {a.run_id} expired without a heartbeat: killing it")
                    a.stop("lost")
                    self.attempt_done(a, released=True)

    # ---- shipping logs and completions, in order ----
    def ship(self, item, completion=None):
        with self.outbox_cv:
            self.outbox.append((item, completion))
            self.outbox_cv.notify()

    def ship_loop(self):
        while True:
            with self.outbox_cv:
                while not self.outbox and not self.quit.is_set():
                    self.outbox_cv.wait()
                if not self.outbox:
                    return
                batch, self.outbox = self.outbox[:1000], self.outbox[1000:]
            chunks = [i for i, c in batch if c is None]
            comps = [(i, c) for i, c in batch if c is not None]
            if chunks:  # resending is safe: the server keeps the first chunk of each seq
                self.deliver("/v1/attempts/logs", {"chunks": chunks})
            if comps:
                r = self.deliver("/v1/attempts/complete", {"completions": [i for i, _ in comps]})
                for res in (r or {}).get("results", []):
                    if not res.get("accepted"):
                        log(f"completion of {res['run_id']} refused: {res.get('error')}")
                for _, at in comps:
                    self.attempt_done(at, released=True)

    def deliver(self, path, body):
        """Send until the server answers; transient errors are retried, 4xx are dropped."""
        delay = 0.1
        while True:
            try:
                return self.call("POST", path, body)
            except ERRORS as e:
                if not transient(e):
                    log(f"{path} refused for good, dropped: {e}")
                    return None
                log(f"{path} failed: {e}; retrying")
            time.sleep(delay + random.random() * delay)
            delay = min(delay * 2, 5.0)

    # ---- lifecycle ----
    def drain(self, *_):
        with self.mu:
            self.draining.set()
            self.abort_poll_locked()

    def run(self):
        self.register()
        if self.gen == 0:
            raise SystemExit("not registered: giving up")
        loops = [threading.Thread(target=f, daemon=True) for f in (self.lease_loop, self.heartbeat_loop)]
        shipper = threading.Thread(target=self.ship_loop, daemon=True)
        for t in loops + [shipper]:
            t.start()
        while not self.draining.wait(0.5):  # short waits keep signal handlers responsive
            pass
        log(f"draining: {len(self.active)} attempt(s) to finish")
        deadline = time.monotonic() + self.drain_timeout
        while self.active and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.active:
            log("drain timeout: stopping the rest")
            for at in list(self.active):
                at.stop("shutdown")
            deadline = time.monotonic() + KILL_GRACE + 10
            while self.active and time.monotonic() < deadline:
                time.sleep(0.1)
        self.quit.set()
        with self.outbox_cv:
            self.outbox_cv.notify()
        shipper.join(10)
        log("drained; exiting")


def main():
    p = argparse.ArgumentParser(description="A stint worker in Python.")
    p.add_argument("--server", default=os.environ.get("STINT_SERVER", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("STINT_TOKEN") or os.environ.get("STINT_WORKER_TOKEN", ""),
                   help="worker token (env STINT_TOKEN or STINT_WORKER_TOKEN)")
    p.add_argument("--id", default=f"{socket.gethostname()}-py-{secrets.token_hex(4)}")
    p.add_argument("--slots", type=int, default=os.cpu_count() or 1, help="attempts run at once")
    p.add_argument("--cpu", type=float, default=float(os.cpu_count() or 1), help="CPUs offered")
    p.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to let attempts finish")
    w = Worker(p.parse_args())
    signal.signal(signal.SIGTERM, w.drain)
    signal.signal(signal.SIGINT, w.drain)
    w.run()


if __name__ == "__main__":
    main()
