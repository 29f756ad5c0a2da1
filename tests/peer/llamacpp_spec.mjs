// Speculative decoding in llama.cpp as node-llama-cpp 3.21.1 offers it: a DraftSequenceTokenPredictor (a
// draft model's context sequence proposing tokens that the target's sequence validates in one batch).
//   node tests/peer/llamacpp_spec.mjs TARGET.gguf DRAFT.gguf --ids 1,2,3 [--n 128] [--gamma 4] [--threads N]
//                                     [--autoregressive]
// Greedy (temperature 0), end-of-generation tokens forbidden, the draft proposing exactly --gamma tokens
// per step (minTokens = maxTokens = gamma, minConfidence 0: no early stop, as speclab's fixed gamma).
// Prints one JSON line: tokens/s over the N tokens after the first (the prompt's evaluation and the first
// token are left out, as llamacpp_probs.mjs bench does), the predictor's counts (validated / refuted
// drafts) and the generated ids. --autoregressive: the same target context without a predictor.
// Package lookup and exit codes as llamacpp_probs.mjs (3: the package or library cannot load).
import path from "node:path";
import fs from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const NPM_DIR = process.env.LLAMACPP_NPM || path.join(ROOT, "build", "npm", "llamacpp");
const VERSION = "3.21.1";

function usage(msg) {
    process.stderr.write(`llamacpp_spec: ${msg}\nusage: llamacpp_spec.mjs TARGET.gguf DRAFT.gguf --ids 1,2 ` +
        `[--n N] [--gamma G] [--threads T] [--autoregressive]\n`);
    process.exit(1);
}

const argv = process.argv.slice(2);
if (argv.length < 2) usage("need a target and a draft");
const opt = { target: argv[0], draft: argv[1], ids: null, n: 128, gamma: 4, threads: 1, ar: false };
for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    if (k === "--autoregressive") { opt.ar = true; continue; }
    const v = argv[++i];
    if (v === undefined) usage(`${k} needs a value`);
    if (k === "--ids") opt.ids = v.split(",").map(Number);
    else if (k === "--n") opt.n = Number(v);
    else if (k === "--gamma") opt.gamma = Number(v);
    else if (k === "--threads") opt.threads = Number(v);
    else usage(`unknown option ${k}`);
}
if (!opt.ids || opt.ids.some(x => !Number.isInteger(x) || x < 0)) usage("--ids needs non-negative integers");

const pkgDir = path.join(NPM_DIR, "node_modules", "node-llama-cpp");
let version;
try {
    version = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
} catch (e) {
    process.stderr.write(`llamacpp_spec: node-llama-cpp not installed in ${NPM_DIR}: ${e.message}\n`);
    process.exit(3);
}
if (version !== VERSION) {
    process.stderr.write(`llamacpp_spec: node-llama-cpp ${version} in ${NPM_DIR}, pinned ${VERSION}\n`);
    process.exit(3);
}
const lib = await import(pathToFileURL(path.join(pkgDir, "dist", "index.js")).href);
let llama;
try {
    llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                                 progressLogs: false, logLevel: lib.LlamaLogLevel.error, maxThreads: 0 });
} catch (e) {
    process.stderr.write(`llamacpp_spec: llama.cpp's prebuilt CPU library does not load: ${e.message}\n`);
    process.exit(3);
}

// The context of the other comparisons (llamacpp_probs.mjs): F32 KV cache, no flash attention.
function ctxOptions(size) {
    return { contextSize: size, batchSize: size, sequences: 1, flashAttention: false,
             experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
             threads: { ideal: opt.threads, min: opt.threads }, swaFullCache: true };
}

try {
    const size = Math.max(opt.ids.length + opt.n + opt.gamma + 8, 64);
    const target = await llama.loadModel({ modelPath: opt.target, gpuLayers: 0, useMmap: true });
    const tctx = await target.createContext(ctxOptions(size));
    let dctx = null, draft = null, seq;
    const bias = lib.TokenBias.for(target);
    for (const t of [target.tokens.eos, target.tokens.eot].filter(t => t != null))
        bias.set(t, "never");
    if (opt.ar) {
        seq = tctx.getSequence();
    } else {
        draft = await llama.loadModel({ modelPath: opt.draft, gpuLayers: 0, useMmap: true });
        dctx = await draft.createContext(ctxOptions(size));
        const draftBias = lib.TokenBias.for(draft); // a TokenBias belongs to one model
        for (const t of [draft.tokens.eos, draft.tokens.eot].filter(t => t != null))
            draftBias.set(t, "never");
        seq = tctx.getSequence({
            tokenPredictor: new lib.DraftSequenceTokenPredictor(dctx.getSequence(), {
                minTokens: opt.gamma, maxTokens: opt.gamma, minConfidence: 0,
                evaluateOptions: { temperature: 0, tokenBias: draftBias },
            }),
        });
    }
    const out = [];
    let t0 = 0n, tFirst = 0;
    const start = process.hrtime.bigint();
    for await (const tok of seq.evaluate(opt.ids, { temperature: 0, tokenBias: bias })) {
        if (out.length === 0) { t0 = process.hrtime.bigint(); tFirst = Number(t0 - start) / 1e9; }
        out.push(tok);
        if (out.length > opt.n) break;
    }
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    const pred = opt.ar ? null : seq.tokenPredictions;
    process.stdout.write(JSON.stringify({
        peer: `node-llama-cpp ${VERSION}`, mode: opt.ar ? "autoregressive" : "speculative", gamma: opt.gamma,
        threads: tctx.currentThreads, tokens: out.length - 1, seconds: dt, tokens_per_s: (out.length - 1) / dt,
        first_token_s: tFirst, predictions: pred, token_ids: out,
    }) + "\n");
    await seq.dispose?.();
    if (dctx) await dctx.dispose();
    await tctx.dispose();
    if (draft) await draft.dispose();
    await target.dispose();
} catch (e) {
    process.stderr.write(`llamacpp_spec: ${e.stack || e.message}\n`);
    process.exit(1);
}
await llama.dispose();
