"""Block rules tried only where they can match: markdown-it's block parser, sped up.

For every line that may start a block, and again for every line of a paragraph (to see
whether something interrupts it), markdown-it calls each block rule in turn, and most
return False at once because the line does not start with their marker: a fence needs
a backtick or a tilde, a heading a ``#``. Those calls were a third of a note's parse.
Here each rule chain is replaced by one function that looks at the line first and calls,
in the chain's order, only the rules that can match it: the same rules would have
returned False without touching the parser's state, so the tokens are the same (tests/
test_chunk.py checks them against the plain parser on generated and real notes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markdown_it import MarkdownIt
from markdown_it.rules_block.state_block import StateBlock

BlockRule = Callable[[StateBlock, int, int, bool], bool]

# The first character (after the indent) a rule needs: markdown-it-py 3.x/4.x checks it
# right after its indented-code check, before touching the parser's state. The table
# and code rules are told apart otherwise (see _may_match); every other rule not listed
# here is always tried.
FIRST_CHARS = {
    "fence": "`~",
    "blockquote": ">",
    "hr": "*-_",
    "list": "*-+0123456789",
    "reference": "[",
    "html_block": "<",
    "heading": "#",
}
_TRIGGERS = frozenset("".join(FIRST_CHARS.values()))
# The chains the parser asks for: the main one and the paragraph interrupters of each
# rule that has a paragraph-like body.
CHAINS = ("", "paragraph", "reference", "blockquote", "list")


def dispatch_by_first_char(md: MarkdownIt) -> None:
    """Make ``md``'s block parser try, on each line, only the rules that can match it.
    Call once the rules are set up (a later change to the ruler is not seen)."""
    ruler = md.block.ruler
    names: dict[BlockRule, str] = {rule.fn: rule.name for rule in ruler.__rules__}
    plain = ruler.getRules
    chains = {chain: [_dispatcher(plain(chain), names)] for chain in CHAINS}

    def get_rules(chain: str = "") -> list[BlockRule]:
        return chains.get(chain) or plain(chain)

    # On the instance (mypy rejects assigning to a method): this parser only.
    setattr(ruler, "getRules", get_rules)  # noqa: B010


def _dispatcher(rules: Sequence[BlockRule], names: dict[BlockRule, str]) -> BlockRule:
    """One rule standing for ``rules``: the first of them that matches, tried in order,
    skipping those the line cannot start."""
    tried: dict[tuple[str | None, bool, bool], tuple[BlockRule, ...]] = {}

    def dispatch(state: StateBlock, line: int, end: int, silent: bool) -> bool:
        pos = state.bMarks[line] + state.tShift[line]
        stop = state.eMarks[line]
        if pos >= stop:  # a blank line: let every rule look (none is expected to match)
            chosen: Sequence[BlockRule] = rules
        else:
            char = state.src[pos]
            key = (
                char if char in _TRIGGERS else None,
                state.src.find("|", pos, stop) >= 0,
                state.sCount[line] - state.blkIndent >= 4,
            )
            found = tried.get(key)
            if found is None:
                found = tried[key] = _candidates(rules, names, *key)
            chosen = found
        for rule in chosen:  # noqa: SIM110 (any() and its generator cost more, every line)
            if rule(state, line, end, silent):
                return True
        return False

    return dispatch


def _candidates(
    rules: Sequence[BlockRule],
    names: dict[BlockRule, str],
    char: str | None,
    pipe: bool,
    indented: bool,
) -> tuple[BlockRule, ...]:
    return tuple(r for r in rules if _may_match(names.get(r, ""), char, pipe, indented))


def _may_match(name: str, char: str | None, pipe: bool, indented: bool) -> bool:
    """Whether rule ``name`` can match a line starting with ``char`` (None: a character
    no listed rule starts with), holding a pipe, indented as code."""
    if name == "table":  # the header row holds a pipe (md_rules.table, and the stock rule)
        return pipe
    if name == "code":
        return indented
    needed = FIRST_CHARS.get(name)
    return needed is None or (char is not None and char in needed)
