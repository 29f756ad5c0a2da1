#!/usr/bin/env python3
"""llama2c_import.py: `speclab` on llama2.c checkpoints written by an independent writer
(tests/importers/llama2c_write.py, numpy, following karpathy/llama2.c's export.py and tokenizer.py).

1. Same samples: `generate --autoregressive` with a fixed seed draws the same tokens from the native
   fixture and from its legacy and version 1 checkpoints (float32: bit-identical logits, so the same
   draws), and from a version 2 (Q8_0) checkpoint and the native model holding numpy's dequantised
   weights. Equality is exact: any logit difference could change a draw, and the weights are equal.
2. `model convert --to llama2c` (each version) then `model probs`: the same distributions, printed
   with 17 digits, as the source (versions 0, 1) or the numpy-dequantised model (version 2); the
   version 1 and 2 files are byte-identical to the numpy writer's; `model info` names the format.
3. tokenize encode with the tokenizer.bin read into sp-bpe gives run.c's encode's ids (computed by
   llama2c_write.py encode on the file itself); skipped while this build's tokenizer lacks sp-bpe.
4. Bad input: damaged checkpoints and tokenizer.bin files exit 2 with one line on stderr, never a
   crash: truncations, zero/negative/huge sizes, n_heads not dividing dim, sizes whose product
   overflows, version 3, a truncated versioned header, tokenizer truncated / negative length /
   length past the end / invalid UTF-8.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SPECLAB = os.environ.get('SPECLAB', 'build/speclab')
PY = ['/usr/bin/python3', 'tests/importers/llama2c_write.py']
SRC = 'tests/ref/llama_f32.safetensors'
ENV = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1')
failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)


def gen(model, out):
    r = subprocess.run([SPECLAB, 'generate', '--autoregressive', '--target', model, '--prompt-ids', '1,7,200',
                        '--tokens', '12', '--seed', '7', '--samples', '3', '--tokens-out', out],
                       capture_output=True, text=True, env=ENV)
    return r


def bad(path, needle, what):
    r = subprocess.run([SPECLAB, 'generate', '--autoregressive', '--target', path, '--prompt-ids', '1', '--tokens',
                        '1'], capture_output=True, text=True, env=ENV)
    lines = r.stderr.strip().split('\n')
    check(r.returncode == 2 and len(lines) == 1 and needle in r.stderr,
          f'{what}: exit {r.returncode}, {len(lines)} line(s): {r.stderr.strip()[:160]}')


def main():
    d = tempfile.mkdtemp(prefix='sl_l2c_cli_')
    try:
        p = lambda n: os.path.join(d, n)
        for v in (0, 1):
            subprocess.run(PY + ['export', SRC, p(f'v{v}.bin'), '--version', str(v)], check=True)
        subprocess.run(PY + ['export', SRC, p('v2.bin'), '--version', '2', '--dequant-out', p('dq.safetensors')],
                       check=True)
        r = gen(SRC, p('src.tok'))
        check(r.returncode == 0, f'generate on the native fixture: {r.stderr.strip()[:200]}')
        ref = open(p('src.tok')).read()
        for v in (0, 1):
            r = gen(p(f'v{v}.bin'), p(f'v{v}.tok'))
            check(r.returncode == 0 and open(p(f'v{v}.tok')).read() == ref,
                  f'version {v} checkpoint samples the same tokens as the native model {r.stderr.strip()[:200]}')
        r1, r2 = gen(p('v2.bin'), p('v2.tok')), gen(p('dq.safetensors'), p('dq.tok'))
        check(r1.returncode == 0 and r2.returncode == 0 and open(p('v2.tok')).read() == open(p('dq.tok')).read(),
              'version 2 (Q8_0) checkpoint samples as the numpy-dequantised native model')

        # ---- model convert / probs / info (the CLI's own writer and reader)
        def probs(model):
            r = subprocess.run([SPECLAB, 'model', 'probs', model, '--prompt-ids', '1,7,200,3,255,0'],
                               capture_output=True, text=True, env=ENV)
            return r.stdout if r.returncode == 0 else 'failed: ' + r.stderr
        ref_probs = probs(SRC)
        check(ref_probs.startswith('{'), 'model probs on the native fixture')
        for v in (0, 1, 2):
            r = subprocess.run([SPECLAB, 'model', 'convert', SRC, p(f'c{v}.bin'), '--to', 'llama2c', '--version', str(v)],
                               capture_output=True, text=True, env=ENV)
            check(r.returncode == 0 and not os.path.exists(p(f'c{v}.tokenizer.bin')),
                  f'model convert --to llama2c --version {v} {r.stderr.strip()[:200]}')
            # Probabilities printed with 17 digits: equal text means equal float32 logits.
            want = ref_probs if v < 2 else probs(p('dq.safetensors'))
            check(probs(p(f'c{v}.bin')) == want, f'model probs: converted version {v} = '
                  + ('the source' if v < 2 else 'the numpy-dequantised model') + ' (exact)')
            a, b = open(p(f'c{v}.bin'), 'rb').read(), open(p(f'v{v}.bin'), 'rb').read()
            if v == 0:
                # The legacy freq_cis tables (S 32 x 8, twice) are float32 cos/sin, computed by
                # libm here and by numpy there: equal to a few ulp, not bit for bit. The rest is.
                f0, f1 = len(a) - 4 * (256 * 64) - 4 * 512, len(a) - 4 * (256 * 64)
                fa, fb = struct.unpack('512f', a[f0:f1]), struct.unpack('512f', b[f0:f1])
                same = len(a) == len(b) and a[:f0] == b[:f0] and a[f1:] == b[f1:] and \
                    max(abs(x - y) for x, y in zip(fa, fb)) <= 1e-6
                check(same, 'version 0: the C and numpy writers give the same bytes, freq_cis within 1e-6')
            else:
                check(a == b, f'version {v}: the C writer and the numpy writer give the same bytes')
        r = subprocess.run([SPECLAB, 'model', 'info', p('c2.bin')], capture_output=True, text=True, env=ENV)
        check(r.returncode == 0 and 'format: llama2c' in r.stdout and '{"Q8_0": 16, "F32": 5}' in r.stdout,
              'model info: format llama2c, source dtypes Q8_0 16 and F32 5')
        r = subprocess.run([SPECLAB, 'model', 'convert', 'tests/ref/gpt2_f32.safetensors', p('g.bin'), '--to', 'llama2c'],
                           capture_output=True, text=True, env=ENV)
        check(r.returncode == 2 and len(r.stderr.strip().split('\n')) == 1 and 'only llama' in r.stderr,
              f'gpt2 -> llama2c refused in one line: {r.stderr.strip()[:200]}')
        # A byte-level BPE tokenizer has no tokenizer.bin form: the checkpoint is written without one.
        r = subprocess.run([SPECLAB, 'model', 'init', '--arch', 'llama', '--config',
                            '{"vocab_size":4096,"n_layer":1,"n_head":2,"d_model":16,"d_ff":16,"max_seq_len":8}',
                            '--tokenizer-json', 'models/tokenizer.json', '--out', p('bb.safetensors')],
                           capture_output=True, text=True, env=ENV)
        if r.returncode == 0:
            r = subprocess.run([SPECLAB, 'model', 'convert', p('bb.safetensors'), p('bb.bin'), '--to', 'llama2c'],
                               capture_output=True, text=True, env=ENV)
            check(r.returncode == 0 and os.path.exists(p('bb.bin')) and not os.path.exists(p('bb.tokenizer.bin')),
                  f'byte-bpe model -> llama2c without tokenizer.bin {r.stderr.strip()[:200]}')
        else:
            print('SKIP: byte-bpe llama model:', r.stderr.strip()[:200])

        # ---- damaged checkpoints
        b1 = open(p('v1.bin'), 'rb').read()
        b0 = open(p('v0.bin'), 'rb').read()

        def put(name, data):
            open(p(name), 'wb').write(data)
            return p(name)

        def patch(b, off, fmt, val):
            return b[:off] + struct.pack(fmt, val) + b[off + struct.calcsize(fmt):]

        bad(put('t_head.bin', b1[:40]), 'header is truncated', 'versioned header truncated')
        bad(put('t_mid.bin', b1[:len(b1) // 2]), 'truncated?', 'version 1 truncated mid-weights')
        bad(put('t_one.bin', b1[:-1]), 'truncated?', 'version 1 one byte short')
        bad(put('t_leg.bin', b0[:-4]), 'unknown model format', 'legacy truncated (no magic: not recognised)')
        bad(put('ver3.bin', patch(b1, 4, '<i', 3)), 'version 3 is not supported', 'version 3')
        bad(put('dim0.bin', patch(b1, 8, '<i', 0)), 'dim = 0', 'dim zero')
        bad(put('lneg.bin', patch(b1, 16, '<i', -3)), 'n_layers = -3', 'n_layers negative')
        bad(put('huge.bin', patch(b1, 8, '<i', 1 << 20)), 'the header implies', 'dim 2^20 in a small file')
        bad(put('heads.bin', patch(b1, 20, '<i', 5)), 'does not divide dim', 'n_heads not dividing dim')
        ov = patch(patch(patch(patch(b1, 8, '<i', 1 << 30), 12, '<i', 2**31 - 1), 16, '<i', 2**31 - 1), 32, '<i',
                   2**31 - 1)
        bad(put('ov.bin', ov), 'overflow', 'size product overflows 64 bits')
        bad(put('magic.bin', b1[:4]), 'header is truncated', 'magic alone')
        bad(put('l_heads.bin', patch(b0, 12, '<i', 5)), 'unknown model format', 'legacy n_heads not dividing dim')

        # ---- encoding with tokenizer.bin: speclab's sp-bpe encoder on the imported tokenizer against
        # run.c's encode (llama2c_write.py encode) on the file itself; exact ids.
        pieces = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)] + [
            '\u2581', '\u2581t', 'he', '\u2581the', '\u2581a', '\u00e9', 'caf\u00e9', '\u2581caf\u00e9', '\u65e5\u672c',
            '\u2581\u2581', 't', 'h', 'e', 'c', 'a', 'f', '\u2581c', '\u2581ca', '\u2581caf', 'll', 'o', 'l', 'lo', '\u2581h']
        scores = [0.0] * 259 + [-1.0 - 0.1 * i for i in range(len(pieces) - 259)]
        json.dump({'bos': 1, 'eos': 2, 'pieces': pieces, 'scores': scores}, open(p('spec.json'), 'w'))
        subprocess.run(PY + ['tokenizer', p('spec.json'), p('e.tokenizer.bin')], check=True)
        subprocess.run(PY + ['random', p('e.bin'), '--dim', '16', '--hidden', '24', '--layers', '1', '--heads', '2',
                             '--kv-heads', '1', '--vocab', str(len(pieces)), '--seq-len', '8', '--version', '1'],
                       check=True)
        texts = ['the caf\u00e9', '\u65e5\u672c x', 'hello  world', ' the  a\t\u00e9\u00e9', 'cafe caf\u00e9s']
        want = subprocess.run(PY + ['encode', p('e.tokenizer.bin'), str(len(pieces))] + texts, capture_output=True,
                              text=True, check=True).stdout.split('\n')[:len(texts)]
        r = subprocess.run([SPECLAB, 'tokenize', 'encode', '--tokenizer', p('e.bin'), '--jsonl'],
                           input=''.join(json.dumps(t) + '\n' for t in texts), capture_output=True, text=True, env=ENV)
        if r.returncode != 0 and 'byte-bpe' in r.stderr:
            print('SKIP: encoding with an sp-bpe tokenizer (not in this build yet):', r.stderr.strip()[:160])
        else:
            got = r.stdout.strip().split('\n')
            check(r.returncode == 0 and [g.split() for g in got] == [w.split() for w in want],
                  f"tokenize encode with the imported tokenizer.bin = run.c's encode: {got} vs {want}")

        # ---- damaged tokenizer.bin beside a small checkpoint (vocab 4)
        subprocess.run(PY + ['random', p('m.bin'), '--dim', '16', '--hidden', '24', '--layers', '1', '--heads', '2',
                             '--kv-heads', '1', '--vocab', '4', '--seq-len', '8', '--version', '1'], check=True)
        tok = lambda pieces, mx=None: struct.pack('<i', max(len(x) for x in pieces) if mx is None else mx) + b''.join(
            struct.pack('<fi', 0.0, len(x)) + x for x in pieces)
        good = tok([b'<unk>', b'\n<s>\n', b'\n</s>\n', b' b'])
        put('m.tokenizer.bin', good)
        r = subprocess.run([SPECLAB, 'generate', '--autoregressive', '--target', p('m.bin'), '--prompt-ids', '1',
                            '--tokens', '1'], capture_output=True, text=True, env=ENV)
        if r.returncode != 0 and 'byte-bpe' in r.stderr:
            print('SKIP: generate with an sp-bpe tokenizer (the tokenizer module reads only byte-bpe here):',
                  r.stderr.strip())
        else:
            check(r.returncode == 0, f'a valid tokenizer.bin loads: {r.stderr.strip()[:200]}')
        cases = [
            (good[:10], 'truncated', 'tokenizer truncated'),
            (good[:-1], 'runs past the end', 'tokenizer last token cut'),
            (patch(good, 8, '<i', -1), 'has length -1', 'tokenizer negative length'),
            (tok([b'<unk>', b'\n<s>\n', b'\n</s>\n', b' b'], mx=100)[:-1], 'runs past the end',
             'tokenizer length past the end'),
            (tok([b'<unk>', b'\n<s>\n', b'\n</s>\n', b'\xff\xfe']), 'not valid UTF-8', 'tokenizer invalid UTF-8 piece'),
            (good + b'\0', 'follow the model', 'tokenizer with more tokens than the model'),
        ]
        for data, needle, what in cases:
            put('m.tokenizer.bin', data)
            bad(p('m.bin'), needle, what)
        os.remove(p('m.tokenizer.bin'))
        put('tokenizer.bin', good[:10])
        bad(p('m.bin'), 'tokenizer.bin: truncated', "the folder's tokenizer.bin is read when STEM.tokenizer.bin is absent")
    finally:
        shutil.rmtree(d)
    print(f'llama2c_import: {len(failures)} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
