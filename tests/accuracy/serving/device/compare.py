#!/usr/bin/env python3
"""Compares llama.cpp's logged buffers (device run logs in DIR) with vramfit's estimate of the same GGUF."""
import re, subprocess, sys, json, os, glob
D = sys.argv[1]; VF = sys.argv[2] if len(sys.argv) > 2 else 'build/vramfit'
HERE = os.path.dirname(os.path.abspath(__file__))
# The GGUFs the cases read, written again here (sparse files of zeros).
os.makedirs('/tmp/g', exist_ok=True)
for spec in glob.glob(os.path.join(HERE, 'specs', '*.json')):
    out = os.path.join('/tmp/g', os.path.basename(spec)[:-5] + '.gguf')
    if not os.path.exists(out):
        subprocess.run([sys.executable, os.path.join(HERE, 'mk_gguf.py'), out, spec], check=True)
cases = {}
for line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cases.txt')):
    p = line.split()
    if p: cases[p[0]] = p[1:]
def arg(a, k, d=None):
    return a[a.index(k) + 1] if k in a else d
free = None
for l in open(os.path.join(D, 'gpu.txt')):
    if l.startswith('free'): free = int(l.split()[1])
for name, a in cases.items():
    path = os.path.join(D, name + '.log')
    if not os.path.exists(path): print(name, 'no log'); continue
    txt = open(path, errors='replace').read()
    model = arg(a, '-m').replace('/tmp/g/', '/tmp/g/')
    if a[0] == 'llama-completion':
        got = {}
        for k, pat in [('gpu_kv', r'CUDA0 KV buffer size =\s*([\d.]+) MiB'), ('host_kv', r'CPU KV buffer size =\s*([\d.]+) MiB')]:
            m = re.findall(pat, txt)  # one line per cache (interleaved SWA: two), summed
            if m: got[k] = sum(float(x) for x in m)
        for k, pat in [('gpu_model', r'CUDA0 model buffer size =\s*([\d.]+) MiB'),
                       ('gpu_compute', r'CUDA0 compute buffer size =\s*([\d.]+) MiB'), ('host_compute', r'CUDA_Host compute buffer size =\s*([\d.]+) MiB'),
                       ('n_ctx', r'llama_context: n_ctx\s*=\s*(\d+)')]:
            m = re.findall(pat, txt)
            if m: got[k] = float(m[-1])
        for k, pat in [('host_model', r'CPU_Mapped model buffer size =\s*([\d.]+) MiB')]:
            m = re.findall(pat, txt)
            if m: got[k] = float(m[-1])
        fitt = arg(a, '-fitt')
        vf = [VF, 'estimate', '--engine', 'llama.cpp', '--config', model, '--json']
        if arg(a, '-c'): vf += ['--ctx-size', arg(a, '-c')]
        else: vf += ['--ctx-size', 'fit']
        if arg(a, '-fa'): vf += ['--flash-attn', arg(a, '-fa')]
        if arg(a, '-ub'): vf += ['--ubatch-size', arg(a, '-ub')]
        if arg(a, '-ngl'): vf += ['--gpu-layers', arg(a, '-ngl')]
        if arg(a, '--n-cpu-moe'): vf += ['--n-cpu-moe', arg(a, '--n-cpu-moe')]
        for flag, mine_flag in [('-np', '--parallel'), ('-ctk', '--cache-type-k'), ('-ctv', '--cache-type-v'), ('-b', '--batch-size')]:
            if arg(a, flag): vf += [mine_flag, arg(a, flag)]
        if '--swa-full' in a: vf += ['--swa-full']
        if '--no-op-offload' in a: vf += ['--no-op-offload']
        if fitt:
            fitt_v = eval(fitt.replace('$FITT_12G', str(free - 12288)).replace('$FITT_6G', str(free - 6144)).replace('$FITT_48G', str(free - 49152)).replace('$FITT_16G', str(free - 16384)).replace('$FITT_24G', str(free - 24576)))
            vf += ['--budget', f'{free - fitt_v + 1024 + 457}MiB']
        r = subprocess.run(vf, capture_output=True, text=True)
        try:
            e = json.loads(r.stdout)['engine']
        except Exception:
            print(name, 'vramfit failed', r.stderr[:300]); continue
        d0 = e['devices'][0]
        mine = {'gpu_model': d0['model_buffer_bytes'] / 2**20, 'gpu_kv': d0['kv_buffer_bytes'] / 2**20,
                'gpu_compute': d0['compute_buffer_bytes'] / 2**20, 'host_compute': e['host']['compute_buffer_bytes'] / 2**20, 'n_ctx': e['n_ctx'],
                'host_model': e['host']['model_buffer_bytes'] / 2**20, 'host_kv': e['host']['kv_buffer_bytes'] / 2**20}
        for k in got:
            err = (mine[k] - got[k]) / got[k] * 100 if got[k] else 0
            print(f'{name:28s} {k:13s} log {got[k]:12.2f} vramfit {mine[k]:12.2f} {err:+7.2f}%')
    else:
        m = re.search(r'^-c (\d+) -ngl (-?\d+)(.*)$', txt, re.M)
        proj = re.findall(r'projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory', txt)
        red = re.findall(r'context size reduced from (\d+) to (\d+)', txt)
        print(name, 'fit ->', m.group(0) if m else None, '| projected', proj, '| reduced', red)
        fitt = arg(a, '-fitt')
        fitt_v = eval(fitt.replace('$FITT_12G', str(free - 12288)).replace('$FITT_6G', str(free - 6144)).replace('$FITT_48G', str(free - 49152)).replace('$FITT_16G', str(free - 16384)).replace('$FITT_24G', str(free - 24576))) if fitt else 1024
        fr = int(proj[0][1]) if proj else free
        vf = [VF, 'estimate', '--engine', 'llama.cpp', '--config', model, '--json', '--ctx-size', 'fit', '--budget', f'{fr - fitt_v + 1024 + 457}MiB']
        r = subprocess.run(vf, capture_output=True, text=True)
        try:
            e = json.loads(r.stdout)['engine']; notes = json.loads(r.stdout)['notes']
            print('   vramfit n_ctx', e['n_ctx'], 'gpu_layers', e['gpu_layers'], [n for n in notes if 'fit' in n][:1])
        except Exception:
            print('   vramfit failed', r.stderr[:300])
