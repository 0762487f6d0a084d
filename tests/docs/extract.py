"""The fenced blocks of README.md and docs/*.md that the docs tests run, parse or check.

Blocks marked `bash tested` / `python tested` run against a quickstart cluster; `bash untested:
REASON` blocks cannot run in CI (docker, several hosts) but their `strata` command lines are still
parsed by strata's own argument parser. A command's shown output is the `# ` lines after it (bash)
or the `# prints:` lines (python).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w+)( [^\n]*)?\n(.*?)^```", re.S | re.M)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


@dataclass
class Command:
    source: str
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    """One fenced block: `language` bash or python, `mark` 'tested' or 'untested: reason' or ''."""

    source: str
    language: str
    mark: str
    body: str

    @property
    def tested(self) -> bool:
        return self.mark == "tested"

    @property
    def untested_reason(self) -> str | None:
        return self.mark.split(":", 1)[1].strip() if self.mark.startswith("untested:") else None


def fenced_blocks(documents: list[Path] | None = None) -> list[Block]:
    """Every fenced block of the documents, in document order."""
    out = []
    for doc in documents or DOCUMENTS:
        for language, mark, body in FENCE.findall(doc.read_text()):
            out.append(Block(doc.name, language, (mark or "").strip(), body))
    return out


def _open(text: str) -> bool:
    """Whether a command continues on the next line (a trailing backslash or an open quote)."""
    return text.endswith("\\") or text.count("'") % 2 == 1


def commands(block: Block) -> list[Command]:
    """The commands of a bash block, each with the `# ` output lines that follow it.

    A command continues over lines ending in a backslash, inside an open single quote, and through
    a here-document (`<<'EOF'` ... `EOF`)."""
    out: list[Command] = []
    current: Command | None = None
    heredoc: str | None = None
    for line in block.body.splitlines():
        if current is not None and heredoc is not None:
            current.text += "\n" + line
            if line.strip() == heredoc:
                heredoc = None
            continue
        if current is not None and _open(current.text):
            current.text += "\n" + line
        elif line.startswith("# ") or line == "#":
            assert current is not None, f"output before any command in {block.source}"
            current.expected.append(line[2:])
            continue
        elif line.strip():
            current = Command(block.source, line)
            out.append(current)
        if match := HEREDOC.search(line):
            heredoc = match.group(1)
    return out


def python_expected(block: Block) -> str | None:
    """The `# prints:` lines of a python block, joined (None when it shows no output)."""
    prints = [
        line.removeprefix("# prints:").strip()
        for line in block.body.splitlines()
        if line.startswith("# prints:")
    ]
    return "\n".join(prints) if prints else None


SHELL_WORDS = {"until", "while", "if", "then", "do", "else", "!", "time", "exec"}


def strata_argvs(command: Command) -> list[list[str]]:
    """The argument lists of every `strata ...` invocation in a command line (split at pipes, `;`,
    `&&`, `||`, `&`; redirections, here-document bodies and leading shell keywords dropped)."""
    text = re.sub(r"<<-?\s*'?(\w+)'?\n.*?^\1$", "", command.text, flags=re.S | re.M)
    text = re.sub(r"(?<=\s)\d>&\d", " ", text.replace("\\\n", " "))  # 2>&1 (no target)
    text = re.sub(r"(?<=\s)\d>", " > ", text)  # 2> file
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    lexer.wordchars += "$%{}[]*?,=.:/@+-~^"
    tokens = list(lexer)
    segments: list[list[str]] = [[]]
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token and set(token) <= set("|&;()"):
            segments.append([])
        elif token and set(token) <= set("<>&"):
            skip = True  # the redirection's target
        else:
            segments[-1].append(token)
    out = []
    for words in segments:
        while words and (words[0] in SHELL_WORDS or re.match(r"^\w+=", words[0])):
            words = words[1:]
        if words and words[0] == "strata":
            out.append(words[1:])
    return out
