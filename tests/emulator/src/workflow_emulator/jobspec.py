"""Validation of the admin API's job requests (POST /admin/jobs) into JobDefinition parts."""

import re

from workflow_emulator import durations
from workflow_emulator.errors import ApiError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def str_field(spec: dict, key: str, default: str) -> str:
    value = spec.get(key, default)
    if not isinstance(value, str) or not value:
        raise ApiError(400, f"{key} must be a non-empty string")
    return value


def duration(value: object, what: str) -> float:
    if isinstance(value, bool):
        raise ApiError(400, f"{what} must be a Go duration string or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = durations.parse(value)
        except ValueError as err:
            raise ApiError(400, f"{what}: {err}") from None
    else:
        raise ApiError(400, f"{what} must be a Go duration string or a number of seconds")
    if not 0 < seconds <= 7 * 86400:
        raise ApiError(400, f"{what} must be more than 0 and at most 7 days")
    return seconds


def _secret(value: object, what: str) -> dict | str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"secret"} and isinstance(value["secret"], str):
        return {"secret": value["secret"]}
    raise ApiError(400, f'{what} must be a string or {{"secret": "..."}}')


def image(value: object) -> dict:
    if isinstance(value, str) and value:
        return {"reference": value}
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("reference"), str)
        or not value["reference"]
    ):
        raise ApiError(
            400, 'image must be a reference string or {"reference", "credentials"?, "isDefault"?}'
        )
    if set(value) - {"reference", "credentials", "isDefault"}:
        raise ApiError(400, "image allows only reference, credentials and isDefault")
    image = {"reference": value["reference"]}
    if "isDefault" in value:
        if not isinstance(value["isDefault"], bool):
            raise ApiError(400, "image.isDefault must be true or false")
        image["isDefault"] = value["isDefault"]
    creds = value.get("credentials")
    if creds is not None:
        if not isinstance(creds, dict) or not isinstance(creds.get("username"), str):
            raise ApiError(400, 'image.credentials must be {"username", "password"}')
        password = _secret(creds.get("password"), "image.credentials.password")
        if isinstance(password, str):
            password = {"secret": password}
        image["credentials"] = {"username": creds["username"], "password": password}
    return image


def env(value: object) -> dict:
    if not isinstance(value, dict):
        raise ApiError(400, "env must be an object of NAME: value")
    env = {}
    for name, v in value.items():
        if not _ENV_NAME.match(name):
            raise ApiError(400, f"env name {name!r} is not a valid variable name")
        env[name] = _secret(v, f"env.{name}")
    return env


def steps(value: object) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, 'steps must be a non-empty list of {"name", "run"}')
    steps = []
    for n, step in enumerate(value):
        if not isinstance(step, dict) or set(step) - {"name", "run", "timeout", "workingDir"}:
            raise ApiError(
                400, f"steps[{n}] must be an object with name, run, optional timeout, workingDir"
            )
        if not isinstance(step.get("name"), str) or not step["name"]:
            raise ApiError(400, f"steps[{n}].name must be a non-empty string")
        if not isinstance(step.get("run"), str):
            raise ApiError(400, f"steps[{n}].run must be a string (a /bin/sh script)")
        out = {"name": step["name"], "run": step["run"]}
        if "workingDir" in step:
            if not isinstance(step["workingDir"], str) or not step["workingDir"]:
                raise ApiError(400, f"steps[{n}].workingDir must be a non-empty string")
            out["workingDir"] = step["workingDir"]
        if "timeout" in step:
            out["timeout"] = durations.to_go(duration(step["timeout"], f"steps[{n}].timeout"))
        steps.append(out)
    return steps
