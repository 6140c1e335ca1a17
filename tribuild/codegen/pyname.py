"""The single quoting helper of generated Python: every user name and value goes through here.

Terms:
- *identifier* (``ident``): a `.tri` name used as a Python local, parameter or class name.
  `.tri` names are identifiers by the grammar, but may be Python keywords (``class``) or shadow
  a name the generated code uses (``torch``, ``self``); those get a trailing ``_``.
- *attribute* (``attr``): a member name on ``self``: ``self.conv1``, or
  ``getattr(self, "class")`` for a keyword.
- *member names* (``member_names``): the attribute each member of a generated class gets.
  A member keeps its source name (state_dict keys read like the source), except a name that
  *clashes*: an attribute of ``nn.Module`` or of the generated classes' base
  (``MODULE_ATTRS``: ``training``, ``forward``, ``to``, ``state_dict``, ``ARGS``,
  ``from_float``...) or a name starting with ``__`` (Python mangles those in a class body).
  A clashing member is ``m_<name>`` (another ``m_`` while that is taken), so ``training``
  is ``self.m_training`` and its keys ``m_training.weight``.
- *member reference* (``member``): a member path (``("layer1", 0, "conv1")``) as Python.
- *literal*: a construction-time value (int, float, bool, str, None, tuple) as Python source;
  *docstring*: any text as a triple-quoted string literal that no text can close early.
"""

from __future__ import annotations

import keyword
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RESERVED = frozenset(
    {
        "torch",
        "nn",
        "F",
        "launch",
        "decoding",
        "model",
        "ternary",
        "K",
        "self",
        "Model",
        "ARGS",
        "build",
        "super",
        "getattr",
        "setattr",
        "True",
        "False",
        "None",
    }
)
# dir(nn.Module), an instance's own attributes and tribuild.runtime.model.Module's, torch 2.13
# (tests/codegen/test_names.py checks the list against the installed torch), and
# `smart_apply`, which transformers sets on nn.Module when it initializes a model (the LM
# tests run transformers in the same process).
MODULE_ATTRS = frozenset(
    """
ARGS T_destination _apply _backward_hooks _backward_pre_hooks _buffers _call_impl
_compiled_call_impl _forward_hooks _forward_hooks_always_called _forward_hooks_with_kwargs
_forward_pre_hooks _forward_pre_hooks_with_kwargs _get_backward_hooks _get_backward_pre_hooks
_get_name _is_full_backward_hook _load_from_state_dict _load_state_dict_post_hooks
_load_state_dict_pre_hooks _maybe_warn_non_full_backward_hook _modules _named_members
_non_persistent_buffers_set _parameters _register_load_state_dict_pre_hook
_register_state_dict_hook _replicate_for_data_parallel _save_to_state_dict _slow_forward
_state_dict_hooks _state_dict_pre_hooks _version _wrapped_call_impl add_module apply bfloat16
buffers call_super_init children compile cpu cuda double dump_patches eval extra_repr float
float_module forward freeze from_float generate get_buffer get_extra_state get_parameter
get_submodule half ipu load_state_dict modules mtia named_buffers named_children named_modules
named_parameters parameters qat register_backward_hook register_trits trits trit_shapes
_pack_trits _trit_names
register_buffer register_forward_hook
register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
register_parameter register_state_dict_post_hook register_state_dict_pre_hook requires_grad_
set_extra_state set_submodule share_memory smart_apply state_dict summary to to_empty train training
type xpu
zero_grad input_dtypes reset_parameters _ddp_params_and_buffers_to_ignore
""".split()
)


def check_identifier(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"not an identifier: {name!r}")
    return name


def ident(name: str) -> str:
    check_identifier(name)
    return (
        f"{name}_"
        if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in RESERVED
        else name
    )


def attr(obj: str, name: str) -> str:
    check_identifier(name)
    return f"getattr({obj}, {literal(name)})" if keyword.iskeyword(name) else f"{obj}.{name}"


def clashes(name: str) -> bool:
    return name in MODULE_ATTRS or name.startswith("__")


def member_names(names: tuple[str, ...]) -> dict[str, str]:
    """The attribute of each member name of one class (see the module doc)."""
    out: dict[str, str] = {}
    for name in names:
        new = check_identifier(name)
        while clashes(new) or (new != name and (new in names or new in out.values())):
            new = f"m_{new}"
        out[name] = new
    return out


def member(path: tuple[Any, ...], names: dict[str, str] | None = None, root: str = "self") -> str:
    """``path`` as Python; its first part is a member, renamed by ``names``."""
    out = root
    for i, part in enumerate(path):
        part = names.get(part, part) if names and i == 0 else part
        out = f"{out}[{part}]" if type(part) is int else attr(out, part)
    return out


def literal(value: object) -> str:
    if type(value) is str:
        text = repr(value)
        return f'"{text[1:-1]}"' if text[0] == "'" and '"' not in value else text
    if value is None or type(value) in (bool, int):
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TypeError(f"no Python literal for {value!r}")


def docstring(text: str) -> str:
    """``text`` as a triple-quoted literal: quotes and backslashes escaped, other unprintable
    characters (but newlines) as escapes."""
    if "\\" not in text and '"' not in text and text.replace("\n", "").isprintable():
        return '"""' + text + '"""'
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n" or ch.isprintable():
            out.append(ch)
        else:
            out.append(ascii(ch)[1:-1])
    return '"""' + "".join(out) + '"""'
