"""Reading a template's values as CloudFormation compares and resolves them: where two values differ
(:func:`changed_paths`) and what a fragment reads (:func:`references`). Below the template diff: it reads
only templates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

#: A property path inside a resource's ``Properties``: keys, and list indexes ("*" in a pattern: any).
Path = tuple[str | int, ...]


def show_path(path: Path) -> str:
    """``LaunchTemplateData.BlockDeviceMappings[0].Ebs``, as a reader writes a path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def intrinsic(value: Any) -> bool:
    """A ``Ref``/``Fn::*``/``Condition`` object: a value known only at deploy."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    key = next(iter(value))
    return key in ("Ref", "Condition") or key.startswith("Fn::")


def same(a: Any, b: Any) -> bool:
    """Equal as CloudFormation compares: a number and the string of it are the same (cdk diff's deepEqual)."""
    if a == b and type(a) is type(b):
        return True
    if any(isinstance(x, bool) or not isinstance(x, int | float | str) for x in (a, b)):
        return False
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def changed_paths(old: Any, new: Any, path: Path = ()) -> list[Path]:
    """The paths where two property values differ: into objects down to their leaves (a missing side read
    as empty), into lists of one length item by item; an intrinsic function, or a list whose length
    changes, is one leaf."""
    if intrinsic(old) or intrinsic(new):
        return [] if old == new else [path]
    if _objects(old, new):
        return _object_paths(old or {}, new or {}, path)
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            p for i, (x, y) in enumerate(zip(old, new, strict=True)) for p in changed_paths(x, y, (*path, i))
        ]
    return [] if same(old, new) else [path]


def _objects(old: Any, new: Any) -> bool:
    """Two objects, or one and nothing: compared key by key."""
    return isinstance(old, dict | None) and isinstance(new, dict | None) and (old or new) is not None


def _object_paths(old: Mapping[str, Any], new: Mapping[str, Any], path: Path) -> list[Path]:
    return [
        p
        for key in sorted(set(old) | set(new))
        for p in changed_paths(old.get(key), new.get(key), (*path, key))
    ]


def _here(node: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(logical id, attribute or None) of what one object reads itself: ``Ref``, ``Fn::GetAtt`` (list or
    ``A.B`` form) and the ``${A}`` / ``${A.B}`` of ``Fn::Sub`` (its own variables, ``${!literal}`` and
    pseudo parameters left out)."""
    if isinstance(node.get("Ref"), str):
        yield node["Ref"], None
    getatt = node.get("Fn::GetAtt")
    getatt = getatt.split(".", 1) if isinstance(getatt, str) else getatt
    if isinstance(getatt, list) and len(getatt) >= 2:
        yield str(getatt[0]), ".".join(map(str, getatt[1:]))
    sub = node.get("Fn::Sub")
    if sub is None:
        return
    text, names = (sub, {}) if isinstance(sub, str) else (sub[0], sub[1] if len(sub) > 1 else {})
    for ref in re.findall(r"\$\{([^!}][^}]*)\}", str(text)):
        target, _, attribute = ref.partition(".")
        if target not in names and "::" not in target:
            yield target, attribute or None


def references(node: Any, path: Path = (), inside: bool = False) -> Iterator[tuple[Path, str, str | None]]:
    """(path, logical id, attribute or None for a Ref) of every reference in a fragment (:func:`_here`).
    The path is the property's: where the intrinsic function stands, not where inside it the reference is."""
    if isinstance(node, list):
        for i, value in enumerate(node):
            yield from references(value, path if inside else (*path, i), inside)
        return
    if not isinstance(node, dict):
        return
    for target, attribute in _here(node):
        yield path, target, attribute
    for key, value in node.items():
        deeper = inside or key.startswith("Fn::") or key == "Ref"
        yield from references(value, path if deeper else (*path, key), deeper)


#: The template's sections the diff reads, each a JSON object when present (CloudFormation's template
#: anatomy).
_SECTIONS = ("Resources", "Parameters", "Outputs", "Conditions", "Mappings")


def template_shape(template: object, which: str) -> str | None:
    """Where `template` is not shaped as a CloudFormation template (its sections objects, each resource an
    object with a Type string and, when it has them, Properties an object), or None."""
    if not isinstance(template, Mapping):
        return f"the {which} template is a JSON {type(template).__name__}, not an object"
    for section in _SECTIONS:
        if not isinstance(template.get(section, {}), Mapping):
            return f"the {which} template's {section} is not an object"
    for rid, resource in (template.get("Resources") or {}).items():
        if not isinstance(resource, Mapping) or not isinstance(resource.get("Type"), str):
            return f"the {which} template's resource {rid} has no Type string"
        if not isinstance(resource.get("Properties", {}), Mapping):
            return f"the {which} template's resource {rid} has Properties that are not an object"
    return None
