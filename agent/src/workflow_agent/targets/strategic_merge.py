"""Kubernetes strategic merge patch for a Pod, as `kubectl patch --type strategic` applies it.

A port of apimachinery's `strategicpatch.StrategicMergeMapPatch` for the Pod fields whose lists
have a patch strategy (the `x-kubernetes-patch-merge-key` / `patch-strategy` of the API schema):

- maps merge recursively; `null` deletes a key;
- lists with a merge key (containers by `name`, env by `name`, volumeMounts by `mountPath`, ...)
  merge item by item; other lists of objects are replaced; `finalizers` merges as a set;
- directives: `$patch: replace|delete|merge` (in maps and list items), `$retainKeys`,
  `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`;
- the resulting order of merged lists follows apimachinery (items named in the patch in the
  patch's order, interleaved with the original's other items by their original position).

Pure functions: no Kubernetes client needed, unit-tested against `kubectl patch --local`.
"""

from __future__ import annotations

import copy
from typing import Any

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"
SET_ELEMENT_ORDER = "$setElementOrder/"


class PatchError(ValueError):
    """The patch cannot be applied (names the field)."""


class Field:
    """Patch metadata of one field: merge key (lists of objects), merge strategy, sub-schema."""

    def __init__(self, merge_key: str = "", merge: bool = False, schema: dict | None = None):
        self.merge_key = merge_key
        self.merge = merge or bool(merge_key)
        self.schema = schema or {}


_CONTAINER = {
    "env": Field("name"),
    "ports": Field("containerPort"),
    "volumeMounts": Field("mountPath"),
    "volumeDevices": Field("devicePath"),
}
_POD_SPEC = {
    "containers": Field("name", schema=_CONTAINER),
    "initContainers": Field("name", schema=_CONTAINER),
    "ephemeralContainers": Field("name", schema=_CONTAINER),
    "volumes": Field("name"),
    "imagePullSecrets": Field("name"),
    "hostAliases": Field("ip"),
    "topologySpreadConstraints": Field("topologyKey"),
    "resourceClaims": Field("name"),
    "schedulingGates": Field("name"),
}
_OBJECT_META = {
    "finalizers": Field(merge=True),
    "ownerReferences": Field("uid"),
}
POD = {"metadata": Field(schema=_OBJECT_META), "spec": Field(schema=_POD_SPEC)}


def merge(original: dict, patch: dict, schema: dict | None = None, path: str = "") -> dict:
    """Apply `patch` to a copy of `original`; PatchError names the field on bad input."""
    schema = POD if schema is None else schema
    if not isinstance(patch, dict):
        raise PatchError(f"{path or 'patch'}: expected an object")
    return _merge_map(copy.deepcopy(original), copy.deepcopy(patch), schema, path)


def _merge_map(original: dict, patch: dict, schema: dict, path: str) -> dict:
    directive = patch.pop(DIRECTIVE, None)
    if directive == "replace":
        return _strip(patch, schema, path)
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(f"{path or 'patch'}: unknown $patch directive {directive!r}")

    retain = patch.pop(RETAIN_KEYS, None)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{_join(path, RETAIN_KEYS)}: expected a list of field names")
        original = {k: v for k, v in original.items() if k in retain}

    orders = {}
    for key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        orders[key[len(SET_ELEMENT_ORDER) :]] = patch.pop(key)
    for key in [k for k in patch if k.startswith(DELETE_FROM_PRIMITIVE)]:
        name = key[len(DELETE_FROM_PRIMITIVE) :]
        remove = patch.pop(key)
        if isinstance(original.get(name), list) and isinstance(remove, list):
            original[name] = [v for v in original[name] if v not in remove]

    for key, value in patch.items():
        here = _join(path, key)
        field = schema.get(key, Field())
        if value is None:
            original.pop(key, None)
            continue
        if key not in original:
            if isinstance(value, list):
                original[key] = _merge_list([], value, field, here)
            else:
                original[key] = _strip(value, field.schema, here)
            continue
        old = original[key]
        if isinstance(old, dict) and isinstance(value, dict):
            original[key] = _merge_map(old, value, field.schema, here)
        elif isinstance(old, list) and isinstance(value, list):
            original[key] = _merge_list(old, value, field, here, orders.get(key))
        else:
            original[key] = _strip(value, field.schema, here) if isinstance(value, dict) else value
    for key, order in orders.items():
        if key not in patch and isinstance(original.get(key), list):
            field = schema.get(key, Field())
            original[key] = _merge_list(original[key], [], field, _join(path, key), order)
    return original


def _strip(value: Any, schema: dict, path: str) -> Any:
    """A patch value with nothing to merge into: apply its directives to an empty original."""
    if isinstance(value, dict):
        return _merge_map({}, value, schema, path)
    return value


def _merge_list(
    original: list, patch: list, field: Field, path: str, order: list | None = None
) -> list:
    if not field.merge:
        # Atomic list: the patch value replaces it verbatim, as in kubectl.
        return patch
    if not all(isinstance(v, dict) for v in original + patch):
        return _merge_primitives(original, patch, order)
    key = field.merge_key
    if not key:
        raise PatchError(f"{path}: cannot merge lists of objects without a merge key")
    if any(isinstance(v, dict) and v.get(DIRECTIVE) == "replace" for v in patch):
        return [_strip(v, field.schema, path) for v in patch if v.get(DIRECTIVE) != "replace"]

    merged = list(original)
    patch_items = []
    for item in patch:
        if key not in item:
            raise PatchError(f"{path}: an item has no merge key {key!r}: {item!r}")
        if item.get(DIRECTIVE) == "delete":
            merged = [m for m in merged if m.get(key) != item[key]]
            continue
        patch_items.append(item)
    for item in patch_items:
        at = next((i for i, m in enumerate(merged) if m.get(key) == item[key]), None)
        here = f"{path}[{key}={item[key]}]"
        if at is None:
            merged.append(_strip(item, field.schema, here))
        else:
            merged[at] = _merge_map(merged[at], item, field.schema, here)
    order_keys = [o.get(key) for o in (order or patch_items) if isinstance(o, dict)]
    return _normalize(merged, order_keys, [o.get(key) for o in original], lambda m: m.get(key))


def _merge_primitives(original: list, patch: list, order: list | None) -> list:
    merged: list = []
    for v in original + patch:
        if v not in merged:
            merged.append(v)
    return _normalize(merged, order if order is not None else patch, original, lambda v: v)


def _normalize(merged: list, patch_order: list, server_order: list, ident) -> list:
    """apimachinery's normalizeElementOrder: patch items in patch order, merged with the
    server-only items so that both keep the original's relative order where they have one."""
    patch_items = [m for m in merged if ident(m) in patch_order]
    server_only = [m for m in merged if ident(m) not in patch_order]
    patch_items.sort(key=lambda m: patch_order.index(ident(m)))
    server_only.sort(key=lambda m: _index(server_order, ident(m), len(server_order)))
    out = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        else:
            li = _index(server_order, ident(server_only[i]), -1)
            ri = _index(server_order, ident(patch_items[j]), -1)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _index(items: list, value: Any, default: int) -> int:
    try:
        return items.index(value)
    except ValueError:
        return default


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
