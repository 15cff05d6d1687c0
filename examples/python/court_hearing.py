#!/usr/bin/env python3
"""The online court: at most 30 participants per hearing.

Forty participants scan the hearing's QR code at the same moment. Each scan
opens a session with the etcdpool HTTP API and claims a seat of the
hearing's pool without waiting. Exactly 30 must be admitted and the other
10 refused with status 409, code "no_seat" and reason "pool_full". Then one
participant leaves, a refused one scans again and is admitted, and every
session is deleted, which frees every seat.

Standard library only. Usage:

    python3 court_hearing.py [API_URL]     # default http://127.0.0.1:8480

API_URL may also come from $ETCDPOOL_API. With credentials, set
$ETCDPOOL_TOKEN to a bearer token whose principal may admin (to create the
pool) and claim. Exits 0 when every answer was right, 1 otherwise.
"""

import json
import os
import sys
import threading
import urllib.error
import urllib.request
import uuid

CAPACITY = 30
SCANS = 40


class Failure(Exception):
    """A wrong answer from the API."""


class API:
    """A minimal client: JSON in, (status, JSON) out."""

    def __init__(self, base, token=None):
        self.base = base.rstrip("/")
        self.token = token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, (json.loads(raw) if raw else None)


def expect(what, status, body, want):
    if status != want:
        raise Failure(f"{what}: got {status} {body}, want {want}")
    return body


def scan(api, pool, who, results):
    """One participant scans: a session, then a claim that does not wait."""
    status, body = api.call("POST", "/v1/sessions", {"ttl": 10})
    session = expect(f"{who}: open session", status, body, 201)["id"]
    status, body = api.call("POST", f"/v1/pools/{pool}/claims", {"session": session, "holder": who})
    results[who] = (session, status, body)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ETCDPOOL_API", "http://127.0.0.1:8480")
    api = API(base, os.environ.get("ETCDPOOL_TOKEN"))
    pool = "hearing-" + uuid.uuid4().hex[:8]
    expect("create the hearing", *api.call("PUT", f"/v1/pools/{pool}", {"capacity": CAPACITY}), 201)

    results = {}
    threads = [threading.Thread(target=scan, args=(api, pool, f"participant-{i:02d}", results)) for i in range(SCANS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(results) != SCANS:
        raise Failure(f"{SCANS - len(results)} scans got no answer")

    admitted = {w: r for w, r in results.items() if r[1] == 201}
    refused = {w: r for w, r in results.items() if r[1] != 201}
    for who, (_, status, body) in refused.items():
        if status != 409 or body.get("code") != "no_seat" or body.get("reason") != "pool_full":
            raise Failure(f"{who} refused with {status} {body}, want 409 no_seat pool_full")
    if len(admitted) != CAPACITY:
        raise Failure(f"{len(admitted)} admitted, want exactly {CAPACITY}")
    seats = {r[2]["seat"] for r in admitted.values()}
    tokens = {r[2]["token"] for r in admitted.values()}
    if len(seats) != CAPACITY or len(tokens) != CAPACITY:
        raise Failure(f"admitted participants share seats or tokens: {len(seats)} seats, {len(tokens)} tokens")
    print(f"{len(admitted)} admitted, {len(refused)} refused: {sorted({r[2]['reason'] for r in refused.values()})}")

    status, body = api.call("GET", f"/v1/pools/{pool}")
    body = expect("pool status", status, body, 200)
    if body["held"] != CAPACITY or body["free"] != 0:
        raise Failure(f"pool status {body}, want {CAPACITY} held and none free")

    leaver = sorted(admitted)[0]
    session, _, claim = admitted.pop(leaver)
    path = f"/v1/pools/{pool}/seats/{claim['seat']}?token={claim['token']}&session={session}"
    expect(f"{leaver} leaves", *api.call("DELETE", path), 204)
    expect(f"{leaver} leaves twice", *api.call("DELETE", path), 404)
    late = sorted(refused)[0]
    session, _, _ = refused[late]
    status, body = api.call("POST", f"/v1/pools/{pool}/claims", {"session": session, "holder": late})
    expect(f"{late} scans again after {leaver} left", status, body, 201)
    print(f"{leaver} left; {late} scanned again and was admitted to seat {body['seat']}")

    for who, (session, _, _) in list(results.items()):
        expect(f"{who}: delete session", *api.call("DELETE", f"/v1/sessions/{session}"), 204)
    status, body = api.call("GET", f"/v1/pools/{pool}")
    if expect("pool status", status, body, 200)["held"] != 0:
        raise Failure(f"seats still held after every session was deleted: {body}")
    print("every session deleted; the hearing is empty")


if __name__ == "__main__":
    try:
        main()
    except Failure as f:
        print("FAIL:", f, file=sys.stderr)
        sys.exit(1)
    except (OSError, ValueError, KeyError) as e:
        print("FAIL:", repr(e), file=sys.stderr)
        sys.exit(1)
