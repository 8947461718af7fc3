"""How often each rule for ordering a shared socket's sends attributes a record to the send
that really wrote it (issue 14; bench/results/messages.md, "Sends sharing a socket").

Usage: order_accuracy.py CULPRIT OUT_DIR [--runs N] [--writers W] [--records M] [--load]

Records `racing_writers.py W M` N times with `CULPRIT record` (with --load: beside two
`nice -n 19` busy loops, the traced program also at nice 19, so that writers are preempted
inside their sends), exports each trace as Chrome JSON (`--no-units`), and compares with
the reader's ground truth (which writer wrote each record, in the order it was read; each
writer's records in its own order, so the k-th record of writer w is its k-th send):
- Culprit's own attribution (the export's flows) and `culprit messages`'s one-host
  violations and `order_inferred_bytes`;
- the same flows re-derived from the recorded call times under simple rules — sends in
  entry order, exit order, midpoint order, each with or without the rule that a send is
  never placed at a record whose receive ended before the send began.
A record is wrong when the send it is attributed to is not the send that wrote it.
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def place(sends, recvs, key, constrained):
    pend = sorted(sends, key=key)
    out = []
    for r1 in recvs:
        if not pend:
            break
        i = 0
        if constrained:
            i = next((k for k, s in enumerate(pend) if s[0] <= r1), 0)
        out.append(pend.pop(i))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('culprit')
    ap.add_argument('out')
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--writers', type=int, default=4)
    ap.add_argument('--records', type=int, default=300)
    ap.add_argument('--load', action='store_true')
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    busy = []
    if a.load:
        busy = [subprocess.Popen(['nice', '-n', '19', 'sh', '-c', 'while :; do :; done'])
                for _ in range(2)]
    try:
        for i in range(a.runs):
            d = os.path.join(a.out, f'run{i}')
            subprocess.run(['rm', '-rf', d], check=True)
            with open(d + '.log', 'w') as log:
                subprocess.run(['nice', '-n', '19', a.culprit, 'record', '-o', d, '--',
                                sys.executable, os.path.join(HERE, 'racing_writers.py'),
                                str(a.writers), str(a.records)],
                               stdout=log, stderr=subprocess.DEVNULL, check=True)
    finally:
        for p in busy:
            p.kill()
    rules = {
        'entry': (lambda s: s[0], False),
        'entry, causal': (lambda s: s[0], True),
        'exit': (lambda s: s[1], False),
        'exit, causal': (lambda s: s[1], True),
        'midpoint, causal': (lambda s: (s[0] + s[1]) / 2, True),
    }
    wrong = {k: 0 for k in rules}
    viol = {k: 0 for k in rules}
    culprit_wrong = culprit_viol = inferred = total = 0
    for i in range(a.runs):
        d = os.path.join(a.out, f'run{i}')
        for line in open(d + '.log'):
            if line.startswith('KIDS '):
                kids = [int(x) for x in line.split()[1:]]
            if line.startswith('SEQ '):
                seq = [int(c) for c in line.split()[1]]
        js = d + '.json'
        subprocess.run([a.culprit, 'export', d, '--format', 'chrome', '--no-units', '-o', js],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ev = json.load(open(js))['traceEvents']
        m = json.loads(subprocess.run([a.culprit, 'messages', '--json', d], check=True,
                                      capture_output=True).stdout)
        culprit_viol += m['violations']
        inferred += sum(c.get('order_inferred_bytes', 0) for c in m['connections'])
        slices = [x for x in ev if x.get('ph') == 'X' and x.get('name') in ('send', 'recv')]
        sends = sorted((x['ts'], x['ts'] + x['dur'], x['pid']) for x in slices
                       if x['name'] == 'send' and x['pid'] in kids)
        per = {}
        for s in sends:
            per.setdefault(s[2], []).append(s)
        count = [0] * len(kids)
        truth = []
        for w in seq:
            truth.append(per[kids[w]][count[w]])
            count[w] += 1
        total += len(truth)
        # Culprit's attribution: the flow into each receive, in the reader's order.
        src = {x['bind_id']: (x['ts'], x['ts'] + x['dur'], x['pid']) for x in slices
               if x.get('flow_out')}
        got = [src[b] for _, b in sorted((x['ts'], x['bind_id']) for x in slices
                                         if x.get('flow_in'))]
        culprit_wrong += sum(g != t for g, t in zip(got, truth)) + abs(len(got) - len(truth))
        recvs = sorted(x['ts'] + x['dur'] for x in slices
                       if x['name'] == 'recv' and x['pid'] not in kids)
        for k, (key, c) in rules.items():
            p = place(sends, recvs, key, c)
            wrong[k] += sum(g != t for g, t in zip(p, truth))
            viol[k] += sum(g[0] > r for g, r in zip(p, recvs))
    print(f'{a.runs} runs, {total} records, writers {a.writers}, load {a.load}')
    print(f'culprit: {culprit_wrong} records attributed to another send '
          f'({100 * culprit_wrong / total:.1f} %), {culprit_viol} violations, '
          f'order_inferred_bytes {inferred} of {total * 8}')
    for k in rules:
        print(f'{k:18} {wrong[k]:6} wrong ({100 * wrong[k] / total:.1f} %), '
              f'{viol[k]} violations')


main()
