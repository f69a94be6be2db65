#!/usr/bin/env python3
"""Writes a deterministic synthetic memex for the computed-context benchmark.

usage: gen-computed-memex.py N K SEED OUTDIR

OUTDIR/memex.org holds exactly N headlines, of which K are knowledge nodes
(seed 001's conventions: `:KIND:` pattern, gotcha or decision, two or three
tags from a technical vocabulary, `:FILE:`, `:SEVERITY:`, `:RATIONALE:`),
a few hundred tasks (TODO keywords, `:DEPENDS_ON:`, checklists, a YAML
handoff on the done ones, `:COMPLEXITY:`), a context map (a table of 500
component / location / notes rows) and, to make up N, ordinary headlines:
projects nested 4-6 levels deep with TODO keywords, everyday tags and a
paragraph of body text, 2 % of them tagged `@personal`. OUTDIR/focus.txt
is the id of a not-done task with done dependencies; OUTDIR/tasks.txt the
ids of 64 not-done tasks (the benchmark cycles through them for new
focuses); OUTDIR/stats.json counts what was written.

Python 3 standard library only, like ../shared/bench/gen_memex.py; the
benchmark writes into the git-ignored target/bench-data.
"""

import json
import os
import sys

MASK64 = (1 << 64) - 1


class SplitMix64:
    """Small, fully specified PRNG (Steele, Lea & Flood 2014)."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next_u64() % n

    def random(self):
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def sample(self, seq, k):
        out = []
        while len(out) < k:
            x = self.choice(seq)
            if x not in out:
                out.append(x)
        return out


# Seed 001's domain triggers first, then more technical words.
TECH = """
endpoint rest graphql route request login token jwt session password query schema
migration model record component button form page style test spec mock assert coverage
cache queue worker retry timeout backoff webhook upload download stream parser lexer
config logging metrics tracing alert deploy rollback container cluster index search
ranking vector embedding prompt budget memory pool thread lock mutex channel socket
header cookie cors csrf oauth saml ldap audit billing invoice payment refund currency
email template render layout theme modal tooltip drawer table chart export import csv
json yaml xml protobuf grpc batch cron scheduler event listener hook plugin registry
loader snapshot backup restore replica shard partition transaction rollback commit
branch review lint format build release version changelog docs tutorial onboarding
notification push sms webhook feature flag experiment rollout quota limit throttle
""".split()
TECH = list(dict.fromkeys(TECH))

EVERYDAY = """able access account action agenda anchor answer archive balance batch beacon
bench binary bridge budget buffer calendar canvas capture chapter checkpoint circuit
clause client column compass context contract cursor cycle daemon dashboard data
decision delta design detail digest draft drift editor energy engine entry field
filter focus folder fragment frame garden gateway gauge graph harbor harness history
horizon inquiry insight journal kernel ledger lens letter library link lookup margin
matrix mentor merge method metric mirror module monitor narrow network node notebook
outline packet pattern payload pipeline planner policy portal protocol ribbon routine
sample scope scribe segment sensor sequence signal sketch skill source spectrum stack
summary survey syntax target thread ticket timeline topic trace track transcript tree
update vision window workflow""".split()

TAGS = ['research', 'writing', 'code', 'infra', 'reading', 'health', 'finance',
        'meeting', 'design', 'ops', 'ml', 'notes', 'idea', 'bug', 'review']

FOLDERS = ['src/api', 'src/auth', 'src/db', 'src/ui', 'src/jobs', 'src/core', 'web/app',
           'web/components', 'tests', 'lib/net', 'lib/store', 'tools']


def words(rng, vocab, k):
    return ' '.join(rng.choice(vocab) for _ in range(k))


def sentence(rng, k=12):
    text = words(rng, EVERYDAY + TECH, k)
    return text[0].upper() + text[1:] + '.'


def path(rng):
    return f'{rng.choice(FOLDERS)}/{rng.choice(TECH)}_{rng.choice(EVERYDAY)}.{rng.choice(["rs", "ts", "py", "go"])}'


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.split('\n\n')[1])
    n, k, seed, outdir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.makedirs(outdir, exist_ok=True)
    rng = SplitMix64(seed)
    counter = [0]

    def new_id(prefix):
        counter[0] += 1
        return f'{prefix}-{counter[0]:06d}'

    out = []
    count = 0
    stats = {'n': n, 'knowledge': 0, 'tasks': 0, 'tasks_with_handoff': 0,
             'map_entries': 0, 'private': 0, 'filler': 0}

    def head(level, title, props, todo=None, tags=(), body=None):
        nonlocal count
        line = '*' * level + ' '
        if todo:
            line += todo + ' '
        line += title
        if tags:
            line += ' :' + ':'.join(tags) + ':'
        out.append(line)
        out.append(':PROPERTIES:')
        for key, value in props:
            out.append(f':{key}: {value}')
        out.append(':END:')
        if body:
            out.append(body)
        count += 1

    # Knowledge.
    head(1, 'Knowledge', [('ID', 'knowledge')])
    for i in range(k):
        kind = ('pattern', 'gotcha', 'decision')[i % 3]
        props = [('ID', new_id('k')), ('KIND', kind)]
        if kind == 'pattern':
            props.append(('FILE', path(rng)))
        elif kind == 'gotcha':
            props.append(('SEVERITY', rng.choice(['low', 'medium', 'high', 'critical'])))
        else:
            props.append(('RATIONALE', sentence(rng, 8)))
        tags = rng.sample(TECH, 2 + rng.below(2))
        private = rng.random() < 0.01
        if private:
            tags.append('@personal')
            stats['private'] += 1
        head(2, words(rng, TECH + EVERYDAY, 6).capitalize(), props, tags=tags)
    stats['knowledge'] = k

    # Tasks: groups of a done dependency chain and not-done tasks on it.
    head(1, 'Tasks', [('ID', 'tasks')])
    n_tasks = max(64, min(400, n // 250))
    done_ids, open_ids = [], []
    for t in range(n_tasks):
        tid = new_id('t')
        is_done = t % 3 != 2
        props = [('ID', tid), ('COMPLEXITY', rng.choice(['easy', 'normal', 'normal', 'complex']))]
        if not is_done and done_ids:
            deps = rng.sample(done_ids[-30:], min(3, len(done_ids[-30:])))
            props.append(('DEPENDS_ON', ' '.join(deps)))
        body = [f'{sentence(rng, 14)} Touch {path(rng)}.']
        for _ in range(2):
            body.append(f'- [ ] {words(rng, TECH, 4)}')
        if is_done:
            body.append('#+begin_src yaml')
            body.append(f'summary: {sentence(rng, 10)}')
            body.append('dependencies_for_next:')
            for _ in range(2):
                body.append(f'  - file: {path(rng)}')
                body.append(f'    reason: {words(rng, EVERYDAY, 4)}')
            body.append('patterns_discovered:')
            body.append(f'  - pattern: {words(rng, TECH, 5)}')
            body.append(f'    applies_to: [{", ".join(rng.sample(TECH, 2))}]')
            body.append(f'    location: {path(rng)}')
            body.append('gotchas:')
            for sev in ('high', 'low'):
                body.append(f'  - issue: {words(rng, TECH, 6)}')
                body.append(f'    severity: {sev}')
            body.append('open_questions:')
            body.append(f'  - question: {words(rng, TECH, 5)}?')
            body.append(f'    blocking: {rng.choice(["true", "false"])}')
            body.append(f'    recommendation: {words(rng, EVERYDAY, 5)}')
            body.append('files_created:')
            body.append(f'  - path: {path(rng)}')
            body.append(f'    purpose: {words(rng, EVERYDAY, 4)}')
            body.append('#+end_src')
            stats['tasks_with_handoff'] += 1
        head(2, words(rng, TECH, 5).capitalize(), props, todo='DONE' if is_done else 'TODO',
             body='\n'.join(body))
        (done_ids if is_done else open_ids).append(tid)
    stats['tasks'] = n_tasks

    # The context map: a table.
    head(1, 'Context Map', [('ID', 'context-map')])
    out.append('| Component | Location | Notes |')
    out.append('|-----------+----------+-------|')
    for _ in range(500):
        out.append(f'| {words(rng, TECH, 2)} | {path(rng)} | {words(rng, TECH + EVERYDAY, 5)} |')
    stats['map_entries'] = 500

    # Filler: projects, nested, to make up exactly N headlines.
    remaining = n - count
    if remaining < 0:
        sys.exit(f'N={n} is too small for K={k} and {n_tasks} tasks')
    stats['filler'] = remaining
    level = 1
    while remaining > 0:
        if level == 1 or rng.random() < 0.3:
            level = 1
        elif rng.random() < 0.5 and level < 6:
            level += 1
        elif level > 2:
            level -= rng.below(2)
        tags = rng.sample(TAGS, rng.below(3))
        if level == 1:
            tags = ['project'] + tags
        if rng.random() < 0.02:
            tags.append('@personal')
            stats['private'] += 1
        todo = rng.choice([None, None, 'TODO', 'NEXT', 'DONE'])
        head(level, words(rng, EVERYDAY, 3 + rng.below(4)).capitalize(), [('ID', new_id('h'))],
             todo=todo, tags=tags, body=sentence(rng, 10 + rng.below(30)))
        remaining -= 1
        level = max(level, 2) if level == 1 else level

    with open(os.path.join(outdir, 'memex.org'), 'w', encoding='utf-8', newline='\n') as f:
        f.write(f'#+TITLE: Computed-context benchmark memex (N={n}, K={k}, seed={seed})\n')
        f.write('#+TODO: TODO NEXT | DONE\n')
        f.write('\n'.join(out))
        f.write('\n')
    focus = next(t for t in open_ids if t)
    with open(os.path.join(outdir, 'focus.txt'), 'w') as f:
        f.write(focus + '\n')
    with open(os.path.join(outdir, 'tasks.txt'), 'w') as f:
        f.write('\n'.join(open_ids[:64]) + '\n')
    stats['headlines'] = count
    with open(os.path.join(outdir, 'stats.json'), 'w') as f:
        json.dump(stats, f, indent=1, sort_keys=True)
        f.write('\n')
    print(json.dumps(stats, sort_keys=True))


if __name__ == '__main__':
    main()
