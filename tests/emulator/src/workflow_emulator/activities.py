"""What POST /api/background-activities/configuration answers [RE]: one entry per kind of
background activity, and which pools each lists. Tests change it with POST
/admin/background-activities; the emulator does not enforce it (a poll of a disabled kind is
served as ever), so a test sees from the agent's own calls whether the agent honoured it."""

from workflow_emulator.errors import ApiError

# [ASSUMED] The kinds are the workflow types the emulator queues: the record shows only
# "deployment" (HappyPumi's one entry); the other two are the lease types' names.
KINDS = ("deployment", "insights_scan", "policy_evaluation")
# Field defaults are HappyPumi's (WorkflowAgentContracts.cs) [RE]; `pools` None lists the
# caller's own pool.
DEFAULTS = {
    "enabled": True,
    "pools": None,
    "interval": 5,
    "canChangeInterval": True,
    "concurrency": 1,
    "agentPoolRegistrationEnabled": False,
}


class BackgroundActivities:
    def __init__(self) -> None:
        self.configure({}, find_pool=None)

    def configure(self, data: dict, find_pool) -> None:
        """Replace every setting: kinds and fields not given go back to their defaults. Pools
        are named by id or name and kept by id."""
        unknown = sorted(set(data) - set(KINDS))
        if unknown:
            raise ApiError(
                400, f"unknown kind(s): {', '.join(unknown)} (one of {', '.join(KINDS)})"
            )
        settings = {}
        for kind in KINDS:
            given = data.get(kind, {})
            if not isinstance(given, dict):
                raise ApiError(400, f"{kind} must be an object")
            bad = sorted(set(given) - set(DEFAULTS))
            if bad:
                raise ApiError(400, f"{kind}: unknown field(s): {', '.join(bad)}")
            s = {**DEFAULTS, **given}
            for key in ("enabled", "canChangeInterval", "agentPoolRegistrationEnabled"):
                if not isinstance(s[key], bool):
                    raise ApiError(400, f"{kind}.{key} must be true or false")
            for key in ("interval", "concurrency"):
                v = s[key]
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 86400:
                    raise ApiError(400, f"{kind}.{key} must be an integer from 0 to 86400")
            pools = s["pools"]
            if pools is not None and (
                not isinstance(pools, list) or not all(isinstance(p, str) and p for p in pools)
            ):
                raise ApiError(400, f"{kind}.pools must be a list of pool ids or names, or null")
            if pools is not None:
                s["pools"] = [find_pool(ref)["id"] for ref in pools]
            settings[kind] = s
        self.settings = settings

    def view(self) -> dict:
        return self.settings

    def answer(self, caller: dict, pools_by_id: dict) -> list[dict]:
        """The JSON array the agent unmarshals (an object fails in the real agent [RE]); a pool
        deleted since it was configured is no longer listed."""
        out = []
        for kind, s in self.settings.items():
            if s["pools"] is None:
                pools = [caller]
            else:
                pools = [pools_by_id[i] for i in s["pools"] if i in pools_by_id]
            out.append(
                {
                    "kind": kind,
                    "interval": s["interval"],
                    "canChangeInterval": s["canChangeInterval"],
                    "concurrency": s["concurrency"],
                    "enabled": s["enabled"],
                    "agentPoolRegistrationEnabled": s["agentPoolRegistrationEnabled"],
                    "agentPools": [
                        {"id": p["id"], "name": p["name"], "description": p["description"]}
                        for p in pools
                    ],
                }
            )
        return out
