"""The store's pools, tokens (pool, runner access and org access tokens) and agents."""

import re
import uuid

from workflow_emulator.errors import ApiError
from workflow_emulator.records import TERMINAL, check_org, new_token, same, token_hash

_USER_AGENT = re.compile(r"^[^/\s]+/(?P<version>\S+)(?:\s+\((?P<os>[^;)]+);\s*(?P<arch>[^)]+)\))?")


class PoolStore:
    """Pools and who may use them (a part of Store: see store.py)."""

    # ---------------------------------------------------------------- pools and tokens
    def create_pool(
        self,
        org: str,
        name: object,
        description: object = "",
        token: str | None = None,
        *,
        is_default: bool = False,
    ) -> tuple[dict, str]:
        check_org(org)
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise ApiError(400, "pool name must be a non-empty string of at most 100 characters")
        if not isinstance(description, str):
            raise ApiError(400, "pool description must be a string")
        if any(p["org"] == org and p["name"] == name for p in self.pools.values()):
            raise ApiError(409, f"organization {org} already has a pool named {name!r}")
        token = token or new_token()
        pool = {
            "id": str(uuid.uuid4()),
            "org": org,
            "name": name,
            "description": description,
            "created": self.clock.now(),
            "token_hash": token_hash(token),
            "stacks": [],
            "is_default": is_default,
            "last_claim": None,
        }
        self.pools[pool["id"]] = pool
        self._put_pool(pool)
        return pool, token

    def seed(self, token: str) -> dict:
        """The pool `default` of the default org, with this token (a restart may change it)."""
        for pool in self.pools.values():
            if pool["org"] == self.org and pool["name"] == "default":
                pool["token_hash"] = token_hash(token)
                self._put_pool(pool)
                return pool
        return self.create_pool(self.org, "default", "seeded by serve", token, is_default=True)[0]

    def _put_pool(self, pool: dict) -> None:
        with self.db.tx():
            self.db.put("pool", pool["id"], pool)

    def find_pool(self, ref: object, org: str | None = None) -> dict:
        if not isinstance(ref, str) or not ref:
            raise ApiError(400, "pool must be a pool id or name")
        pools = [p for p in self.pools.values() if org is None or p["org"] == org]
        for pool in pools:
            if pool["id"] == ref:
                return pool
        named = [p for p in pools if p["name"] == ref]
        if len(named) > 1:
            named = [p for p in named if p["org"] == self.org] or named
        if len(named) == 1:
            return named[0]
        if named:
            raise ApiError(400, f"pool name {ref!r} is ambiguous: give its id")
        raise ApiError(404, f"no pool {ref!r}" + (f" in organization {org}" if org else ""))

    def update_pool(self, pool: dict, changes: dict) -> dict:
        if "name" in changes:
            name = changes["name"]
            if not isinstance(name, str) or not name.strip() or len(name) > 100:
                raise ApiError(
                    400, "pool name must be a non-empty string of at most 100 characters"
                )
            if any(
                p["org"] == pool["org"] and p["name"] == name and p["id"] != pool["id"]
                for p in self.pools.values()
            ):
                raise ApiError(409, f"organization {pool['org']} already has a pool named {name!r}")
        if "description" in changes and not isinstance(changes["description"], str):
            raise ApiError(400, "pool description must be a string")
        if "stacks" in changes:
            stacks = changes["stacks"]
            if not isinstance(stacks, list) or not all(isinstance(s, str) for s in stacks):
                raise ApiError(400, "stacks must be a list of strings")
        for key in ("name", "description", "stacks"):
            if key in changes:
                pool[key] = changes[key]
        self._put_pool(pool)
        return pool

    def delete_pool(self, pool: dict, *, force: bool) -> None:
        unfinished = [
            j
            for j in self.jobs.values()
            if j["pool_id"] == pool["id"] and j["status"] not in TERMINAL
        ]
        if not force and (pool["stacks"] or unfinished):
            what = []
            if pool["stacks"]:
                what.append(f"stacks {', '.join(pool['stacks'])}")
            if unfinished:
                what.append(f"{len(unfinished)} unfinished jobs")
            raise ApiError(
                400,
                f"pool {pool['name']!r} is still referenced by {' and '.join(what)};"
                " delete with ?force=true",
            )
        for job in unfinished:
            self.cancel(job, "pool deleted")
        del self.pools[pool["id"]]
        with self.db.tx():
            self.db.delete("pool", pool["id"])
            for h, tok in list(self.tokens.items()):
                if tok.get("pool_id") == pool["id"]:
                    del self.tokens[h]
                    self.db.delete("token", h)

    def pool_for_token(self, token: str) -> dict | None:
        """The pool a pool token or runner access token belongs to; compared in constant time."""
        h = token_hash(token)
        found = None
        for pool in self.pools.values():
            if same(pool["token_hash"], h):
                found = pool
        if found:
            return found
        tok = self._access_token(h, "runner")
        return self.pools.get(tok["pool_id"]) if tok else None

    def _access_token(self, h: str, kind: str) -> dict | None:
        found = None
        for key, tok in self.tokens.items():
            if same(key, h) and tok["kind"] == kind:
                found = tok
        if found and found.get("expires") is not None and found["expires"] <= self.clock.now():
            return None
        return found

    def add_access_token(self, kind: str, **doc: object) -> str:
        token = new_token()
        rec = {"hash": token_hash(token), "kind": kind, **doc}
        self.tokens[rec["hash"]] = rec
        with self.db.tx():
            self.db.put("token", rec["hash"], rec)
        return token

    def org_token(self, token: str) -> dict | None:
        """An access token minted for the pool REST API (`org` is "*" for every org)."""
        return self._access_token(token_hash(token), "org")

    # ---------------------------------------------------------------- agents
    def see_agent(self, pool: dict, ident: dict, call: str) -> dict:
        """The agent behind a pool-token call, created on its first; `call` (poll, token,
        configuration, ...) is counted, and the order of each kind's first call kept, so that a
        test can tell what an agent did before it first polled."""
        hostname = ident.get("hostname") or ident["ip"] or "unknown"
        name = ident.get("instance") or ident.get("pid") or "-"
        agent_id = f"{hostname}/{name}"
        key = f"{pool['id']}|{agent_id}"
        now = self.clock.now()
        agent = self.agents.get(key)
        if agent is None:
            agent = {
                "key": key,
                "id": agent_id,
                "pool_id": pool["id"],
                "first_seen": now,
                "claims": 0,
            }
            self.agents[key] = agent
        m = _USER_AGENT.match(ident.get("user_agent") or "")
        agent.update(
            hostname=ident.get("hostname") or None,
            instance=ident.get("instance") or None,
            pid=ident.get("pid") or None,
            ip=ident["ip"],
            user_agent=ident.get("user_agent") or "",
            version=m.group("version") if m else "",
            platform=f"{m.group('os')}/{m.group('arch')}".lower() if m and m.group("os") else "",
            last_seen=now,
        )
        calls = agent.setdefault("calls", {})  # setdefault: agents of an older state file
        calls[call] = calls.get(call, 0) + 1
        first = agent.setdefault("first_calls", [])
        if call not in first:
            first.append(call)
        with self.db.tx():
            self.db.put("agent", key, agent)
        return agent

    def list_agents(self, *, pool: dict | None, online_within: float | None) -> list[dict]:
        now = self.clock.now()
        out = []
        for agent in sorted(self.agents.values(), key=lambda a: (a["pool_id"], a["id"])):
            if pool is not None and agent["pool_id"] != pool["id"]:
                continue
            if online_within is not None and now - agent["last_seen"] > online_within:
                continue
            out.append(agent)
        return out

    def agent_online(self, agent: dict) -> bool:
        return self.clock.now() - agent["last_seen"] <= self.online_window
