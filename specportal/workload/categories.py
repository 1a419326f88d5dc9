"""Task categories and the prompt classifier (DESIGN §6).

The category decides the emulator's acceptance and output lengths. It travels with each request in
``X-SpecPortal-Category`` (real engines ignore the header); without it the emulator classifies the
prompt: bundled prompts exactly, anything else by rule (``classifier.classify``; this module
knows nothing of the bundled sets, which are read by category).
"""

from __future__ import annotations

import re
from typing import Final, Literal

Category = Literal["chat", "code", "summarization", "math", "qa"]
CATEGORIES: Final[tuple[Category, ...]] = ("chat", "code", "summarization", "math", "qa")
CATEGORY_HEADER: Final = "X-SpecPortal-Category"

# The rule-based classifier. Each category has signals (a pattern and a weight); a signal scores
# its weight once per distinct phrase it matches, up to a cap, so "three times as old ... twice as
# old ... how old" counts three times while one repeated word counts once. Summarization and
# retrieval-style QA are recognised by their instruction or layout ("summarize", "Context: ...
# Question: ..."), which outrank the topic: a passage full of numbers with a question under it is
# still QA. Code and math are recognised by vocabulary and notation; numbers add to math only
# beside other math signals (chat prompts mention "30 minutes" too), and first-person requests for
# advice or plans count against math (a party plan with a guest count is chat).
_Signal = tuple[re.Pattern[str], float, int]


def _signals(*specs: tuple[str, float, int]) -> tuple[_Signal, ...]:
    return tuple((re.compile(p, re.I | re.M), weight, cap) for p, weight, cap in specs)


_SUMMARIZATION: Final = _signals(
    (
        r"\bsumm?ar(y|ies|i[sz]e[sd]?|i[sz]ing)\b|\btl;?\s?dr\b|\bsum (it |this |that |them )?up\b",
        3,
        1,
    ),
    (r"\b(synopsis|recap|gist|boil (it |this )?down|condense|in a nutshell)\b", 3, 1),
    (r"\b(key|main) (points|ideas|takeaways|findings|arguments|messages?)\b|\btakeaways\b", 2, 1),
    (
        r"\bin (one|two|three|four|five|a few|\d+) (short )?(sentences?|bullet( point)?s?|lines?|"
        r"paragraphs?|words)\b",
        1.5,
        1,
    ),
    (r"\b(give me|write|what'?s) the (short|shorter|quick|one-line) version\b", 3, 1),
    (r"\b(shorten|brief overview|briefly|highlights|short version|bullet points)\b", 1, 2),
    (
        r"\b(following|below|above|attached|this|these) (\w+ )?(article|email|e-mail|thread|report|"
        r"transcript|notes|meeting|paper|chapter|story|review|letter|memo|notice|post|conversation|"
        r"speech|essay|minutes|announcement|episode|lecture|podcast|book|study)\b|"
        r"\b(article|email|e-mail|thread|report|transcript|notes|memo|notice|post|conversation|"
        r"review|letter|text|paragraph|chapter) (below|above|attached)\b|"
        r"\b(described|shown|quoted|pasted) (below|above)\b",
        1,
        1,
    ),
)
_QA: Final = _signals(
    (
        r"^\W*([a-z]+ ){0,2}(context|passage|document|article|excerpt|source|reference|background|"
        r"text|snippet|record|notes?|leaflet|manual|policy|label|faq|minutes|table|bio|description|"
        r"paragraph|schedule|timetable|menu|contract|terms)"
        r"\W*:",
        3,
        1,
    ),
    (r"\b(use|using|with|from|answer from) only\b|\bonly (use|using)\b", 3, 1),
    (
        r"\b(based on|according to|from|in|given) (the|this|that|these|my) (\w+ ){0,2}"
        r"(context|passage|text|document|article|excerpt|information|leaflet|manual|notes|policy|"
        r"page|paragraph|snippet|table|record|sentence|label|email|minutes|lease|release notes|"
        r"report|following|above|below)\b",
        2.5,
        1,
    ),
    (r"\b(based on|according to) the following\b|\baccording to (the|this)\b", 1, 1),
    (
        r"\banswer (the|this|my|each|these) (question|questions)\b|\banswer (using|based|from)\b",
        2,
        1,
    ),
    (r"^\W*(question|q)\W*:", 1.5, 1),
    (
        r"\bif (the answer|it) (is not|isn't|is missing|is not covered|isn't covered|isn't there)|"
        r"\bnot (stated|mentioned|given|covered) in\b|\bcannot be (determined|answered) from\b|"
        r"\bsay (so|\"not stated\"|that you don't know)",
        1.5,
        1,
    ),
    (r"\"[^\"\n]{60,}\"|(?<!\w)'[^'\n]{60,}'(?!\w)|“[^”\n]{60,}”", 1.5, 1),
    (r"\bhere (is|are) (a|an|the|some|my|our|this|their) (\w+ ){0,2}\w+:", 1.5, 1),
)
_CODE: Final = _signals(
    (
        r"```|^\s*(def|class|import|from \S+ import|#include|package|using namespace)\b|"
        r"\bdef \w+\(|\b(for|while|if|switch)\s*\([^()\n]*\)\s*\{|"
        r"\bfunction\s*\w*\s*\(|=>|\bconsole\.log\b|\bprint\(|\breturn\b[^.\n]*;|"
        r"\bselect\b.+\bfrom\b.+\bwhere\b|^\s*\$ \w|Traceback \(most recent",
        3,
        1,
    ),
    (
        r"\bwrite (a |an |me (a |an )?|some )?([\w+#.-]+ ){0,3}(function|method|program|script|class|"
        r"query|regex|regular expression|snippet|unit tests?|tests?|decorator|module|endpoint|"
        r"generator|iterator|parser|library|package|plugin|extension|bot|"
        r"api|cli|component|hook|macro|one-liner|code|dockerfile|makefile|cron)\b",
        3,
        1,
    ),
    # Names that mean programming whatever the sentence; then names that are also words.
    (
        r"\b(python|javascript|typescript|c\+\+|c#|golang|kotlin|php|sql|postgres(ql)?|mysql|"
        r"sqlite|html|css|node\.?js|django|flask|fastapi|numpy|pandas|git|github|docker(file)?|"
        r"kubernetes|terraform|regex|json|yaml|graphql|jvm|npm|webpack|powershell|valgrind)\b",
        3,
        1,
    ),
    (
        r"\b(java|rust|ruby|swift|scala|haskell|perl|bash|react|vue|angular|linux|macos|unix|"
        r"shell|vim|excel formula|gdb|nginx|redis|pip)\b|\bin (go|c)\b",
        2,
        2,
    ),
    (
        r"\b[A-Z]\w*(Error|Exception)\b|\b(dependency injection|design patterns?|singleton|"
        r"microservices?|orm|rest(ful)? api|mocking|object-oriented|functional programming|"
        r"concurrency|garbage collect(ion|or)|pull requests?|rebase|version control)\b",
        2,
        1,
    ),
    (r"\b(GET|POST|PUT|PATCH|DELETE)\b", 1.5, 1),
    (
        r"\b(functions?|methods?|variables?|loops?|recursion|recursive(ly)?|algorithms?|arrays?|"
        r"linked lists?|hash ?maps?|hash tables?|integers?|booleans?|floats?|pointers?|"
        r"compil(e|er|ing)|runtime|exceptions?|stack traces?|bugs?|debug(ging)?|refactor(ing)?|"
        r"unit tests?|scripts?|snippets?|code|coding|programs?|programming|programmers?|"
        r"quer(y|ies)|databases?|repository|repo|commits?|merge conflicts?|endpoints?|"
        r"librar(y|ies)|modules?|dependenc(y|ies)|syntax|segfault|threads?|async|await|lambdas?|"
        r"iterators?|data structures?|time complexity|big-?o|constructor|inheritance|"
        r"interfaces?|parser|api|http|cli|stdin|stdout|callback|closure|deadlock|race condition|"
        r"memory leak|type hints?|schema|migrations?|caching|command line|terminal|port|"
        r"process(es)?|index(es)?|server|client|request|response|string|list comprehension|"
        r"dictionar(y|ies)|tuples?|objects?|classes|compile|build|deploy|container|image|"
        r"branch(es)?|remote|component|re-?renders?|props|headers?|undefined|keyword)\b",
        1,
        4,
    ),
    (r"`[^`\n]+`", 1.5, 1),
    (
        r"(?-i:\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\()|\w\(\)|==|!=|&&|\|\||\+=|->|"
        r"::|\[\]|\{\}|\w\.\w+\(",
        1.5,
        2,
    ),
    (
        r"\bimplement(ing|ation)?\b|\b(fix|explain|review) (this|the|my) (code|bug|error|function)\b",
        1,
        1,
    ),
    (
        r"(^|\s)--[a-z][a-z-]+\b|\w\.(py|js|ts|rs|go|java|cpp|rb|sh|sql|json|yaml|yml|toml|c|h)\b",
        1,
        1,
    ),
)
_MATH: Final = _signals(
    (
        r"\d\s*[+*×÷^=<>≤≥]\s*\(?\d|\b\d+\s*/\s*\d+\b(?!\s*/)|√|π|∑|∫|\bx\^?2\b|"
        r"\b\d*[a-z]\s*[+\-*/=]\s*\d",
        3,
        1,
    ),
    (
        r"\b(solve|equations?|integral|derivative|differentiate|integrate|prove|proof|"
        r"probability|odds|percent(age)?|simplify|factori[sz]e|polynomial|quadratic|logarithm|"
        r"exponent|inequality|theorem|arithmetic|algebra|geometry|calculus|combinations?|"
        r"permutations?|expected value|least common multiple|greatest common (divisor|factor)|"
        r"lcm|gcd|sequence|consecutive|prime|chance|at random)\b|%",
        2.5,
        2,
    ),
    (
        r"\bhow many \w+ (are there |is there )?in (a|an|one|\d+)\b|\b(earn|earns|pays?|saves?|"
        r"spends?) \$?\d|\b(an|a|per) (hour|week|month|year)\b",
        2,
        1,
    ),
    (
        r"\b(how (many|much|long|far|fast|old|often|tall|wide|deep|heavy|high)|what (is|are|was|were) "
        r"the (\w+ ){0,2}(sum|area|volume|perimeter|average|mean|median|ratio|total|cost|price|"
        r"speed|value|probability|angle|number|numbers|percentage|difference|product|remainder|"
        r"distance|rate|length|width|height)|find (the|its|all|x|their|how)|calculate|compute|"
        r"work out|show (the|your) (calculation|work|working|steps)|what are (the numbers|they)|"
        r"which is (cheaper|faster|larger|bigger|more))\b",
        2,
        2,
    ),
    (
        r"\b(average|mean|median|ratio|proportion(al)?|fractions?|area|volume|perimeter|radius|"
        r"diameter|circumference|triangle|rectangle|circle|square root|squared|cubed|"
        r"divisible|remainder|multiples?|digits?|sum|product|difference|interest|discount|"
        r"profit|speed|rate|distance|scale|convert|formula|times as|twice as|half as|"
        r"at the same rate|per (hour|minute|day|week|month|year|kg|km|liter|litre|person|unit|"
        r"item)|altogether|left over|cheapest|numbers?|angle|degrees|shortcut)\b",
        1,
        3,
    ),
    (
        r"\b(km/h|mph|m/s|cm|mm|km|kg|mg|ml|liters?|litres?|meters?|metres?|miles?|feet|inches|"
        r"°[CF]?|dollars|euros|cents)\b|[$€£]\s?\d",
        0.5,
        2,
    ),
)
_CHAT: Final = _signals(
    (
        r"\b(i'm|i am|i've|i have|i want|i'd like|i need|we're|we are|my (partner|wife|husband|"
        r"mother|mom|father|dad|son|daughter|kids?|friends?|family|boss|coworker|team|neighbou?rs?|"
        r"guests?))\b",
        1,
        3,
    ),
    (
        r"\b(help me (plan|decide|choose|think)|advice|suggest(ions)?|tips|ideas|recommend(ations)?|"
        r"should i|what do you think|itinerary|trip|party|dinner|wedding|birthday|vacation|"
        r"holiday|gift|recipe|workout)\b",
        1,
        3,
    ),
)


def _score(signals: tuple[_Signal, ...], text: str) -> float:
    total = 0.0
    for pattern, weight, cap in signals:
        found = {m.group(0).lower() for m in pattern.finditer(text)}
        total += weight * min(len(found), cap)
    return total


_NUMBER: Final = re.compile(
    r"(?<![\w.])\d+(?:[.,:]\d+)*|\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"twice|half|third|quarter|double|triple)\b",
    re.I,
)

SUMMARIZATION_THRESHOLD: Final = 3.0
QA_THRESHOLD: Final = 3.0
CODE_THRESHOLD: Final = 3.0
MATH_THRESHOLD: Final = 3.5


# Synthetic prompts (``specportal.workload.synthetic``) are toy-vocabulary word salad: lowercase
# words and spaces only, no phrasing to read. They keep the keyword rules they have always been
# classified by, so emulated runs of synthetic workloads (which carry no category) keep their
# categories, acceptance and output lengths.
_WORD_SALAD: Final = re.compile(r"[a-z ]*")
_KEYWORD_RULES: Final[tuple[tuple[Category, re.Pattern[str]], ...]] = (
    ("code", re.compile(r"```|\bdef |\bclass |\bfunction\b|\breturn\b|[{};]\s*$|\bimport ", re.M)),
    ("summarization", re.compile(r"\bsummar(y|ize|ise)\b|\btl;?dr\b", re.I)),
    ("qa", re.compile(r"\bcontext\s*:|\bdocuments?\s*:|\bpassage\s*:|according to the", re.I)),
    ("math", re.compile(r"\bsolve\b|\bcompute\b|\bcalculate\b|\d+\s*[-+*/×÷=]\s*\d+", re.I)),
)


# Instructions sit at the start or the end of a prompt ("Summarize ...", "Context: ... Question:
# ..."); reading only there keeps the cost per request bounded on long documents.
_HEAD_CHARS: Final = 2000
_TAIL_CHARS: Final = 1000


def rule_category(prompt: str) -> Category:
    """The rule-based classifier alone (no bundled lookup): see the signals above."""
    if _WORD_SALAD.fullmatch(prompt):
        for category, pattern in _KEYWORD_RULES:
            if pattern.search(prompt):
                return category
        return "chat"
    if len(prompt) > _HEAD_CHARS + _TAIL_CHARS:
        prompt = prompt[:_HEAD_CHARS] + "\n" + prompt[-_TAIL_CHARS:]
    summarization = _score(_SUMMARIZATION, prompt)
    qa = _score(_QA, prompt)
    if max(summarization, qa) >= min(SUMMARIZATION_THRESHOLD, QA_THRESHOLD):
        if qa > summarization and qa >= QA_THRESHOLD:
            return "qa"
        if summarization >= SUMMARIZATION_THRESHOLD:
            return "summarization"
    code = _score(_CODE, prompt)
    # Code notation (a fence, a definition, an import) decides against math: "fib(n - 1) + 2"
    # inside a function is code, not arithmetic.
    if code >= CODE_THRESHOLD and _CODE[0][0].search(prompt):
        return "code"
    math = _score(_MATH, prompt)
    if math > 0:
        # Numbers make a word problem likelier only beside another math signal.
        math += 0.75 * min(len(_NUMBER.findall(prompt)), 4)
        math -= _score(_CHAT, prompt)
    if code >= CODE_THRESHOLD and code >= math:
        return "code"
    if math >= MATH_THRESHOLD:
        return "math"
    return "code" if code >= CODE_THRESHOLD else "chat"


def parse_category(value: str | None) -> Category | None:
    """A header value → a category (case-insensitive); unknown values → ``None``."""
    if value is None:
        return None
    lowered = value.strip().lower()
    for category in CATEGORIES:
        if category == lowered:
            return category
    return None
