// llama.cpp as an independent peer for GGUF files, through the npm package node-llama-cpp 3.21.1
// (its prebuilt CPU library; nothing is compiled). See tests/peer/README.md.
//
//   node tests/peer/llamacpp_probs.mjs probs MODEL.gguf... --ids 1,2,3 [--threads N] [--tokenize FILE.jsonl]
//       For each position j, llama.cpp's full next-token distribution after ids[0..j]:
//       {"n_vocab", "ids", "argmax": [...], "probs": [[p_0 .. p_{V-1}], ...], "options": {...},
//        "info": {as the info command}}
//   node tests/peer/llamacpp_probs.mjs info MODEL.gguf... [--tokenize FILE.jsonl]
//       llama.cpp's view of the file (architecture, n_vocab, n_ctx_train, tokenizer model and
//       pre-tokenizer, BOS/EOS, add-BOS) and, for each JSON string of FILE.jsonl, the ids
//       llama.cpp's tokenizer gives it (no BOS/EOS added, special-token text not parsed).
//   node tests/peer/llamacpp_probs.mjs bench MODEL.gguf... [--n 128] [--threads N] [--first ID] [--kv f32|f16]
//       Decode speed: one prompt token (default 0), then N greedy tokens one at a time (EOS/EOT
//       forbidden); tokens/s over the N tokens after the first. --kv f16: llama.cpp's default
//       context (F16 KV cache, flash attention "auto") instead of the comparison's.
//   Several MODEL files: one JSON line each, in order. --tokenize-only 0,3: tokenize only with the
//   models at those (0-based) positions.
//
// The package is looked up in $LLAMACPP_NPM (default build/npm/llamacpp under the repository root:
// its own npm prefix, since an `npm install --no-save` into build/npm for another test prunes
// every package that install did not name).
// Exit codes: 0 ok, 3 the package or its prebuilt library cannot load (callers SKIP), 1 other.
import path from "node:path";
import fs from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const NPM_DIR = process.env.LLAMACPP_NPM || path.join(ROOT, "build", "npm", "llamacpp");
const VERSION = "3.21.1";

function usage(msg) {
    process.stderr.write(`llamacpp_probs: ${msg}\nusage: llamacpp_probs.mjs probs|info|bench MODEL.gguf ` +
        `[--ids 1,2,3] [--threads N] [--tokenize FILE.jsonl [--tokenize-only I,J]] [--n N] [--first ID] ` +
        `[--kv f32|f16]\n`);
    process.exit(1);
}

function parseArgs(argv) {
    const cmd = argv[0];
    const models = [];
    let i = 1;
    for (; i < argv.length && !argv[i].startsWith("--"); i++)
        models.push(argv[i]);
    if (!["probs", "info", "bench"].includes(cmd) || models.length === 0)
        usage("need a command and a model");
    const opt = { cmd, models, threads: 1, n: 128, first: 0, kv: "f32", ids: null, tokenize: null, tokenizeOnly: null };
    for (; i < argv.length; i += 2) {
        const k = argv[i], v = argv[i + 1];
        if (v === undefined) usage(`${k} needs a value`);
        if (k === "--ids") opt.ids = v.split(",").map(s => Number(s));
        else if (k === "--threads") opt.threads = Number(v);
        else if (k === "--n") opt.n = Number(v);
        else if (k === "--first") opt.first = Number(v);
        else if (k === "--kv" && (v === "f32" || v === "f16")) opt.kv = v;
        else if (k === "--tokenize") opt.tokenize = v;
        else if (k === "--tokenize-only") opt.tokenizeOnly = new Set(v.split(",").map(Number));
        else usage(`unknown option ${k}`);
    }
    if (cmd === "probs" && (!opt.ids || opt.ids.length === 0 || opt.ids.some(x => !Number.isInteger(x) || x < 0)))
        usage("probs needs --ids with non-negative integers");
    if (!Number.isInteger(opt.threads) || opt.threads < 1 || !Number.isInteger(opt.n) || opt.n < 1)
        usage("--threads and --n take positive integers");
    return opt;
}

async function loadPackage() {
    const pkgDir = path.join(NPM_DIR, "node_modules", "node-llama-cpp");
    let version;
    try {
        version = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
    } catch (e) {
        process.stderr.write(`llamacpp_probs: node-llama-cpp not installed in ${NPM_DIR}: ${e.message}\n`);
        process.exit(3);
    }
    if (version !== VERSION) {
        process.stderr.write(`llamacpp_probs: node-llama-cpp ${version} in ${NPM_DIR}, pinned ${VERSION}\n`);
        process.exit(3);
    }
    const lib = await import(pathToFileURL(path.join(pkgDir, "dist", "index.js")).href);
    let llama;
    try {
        // CPU only, prebuilt binary only: never download or compile llama.cpp.
        llama = await lib.getLlama({
            gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
            progressLogs: false, logLevel: lib.LlamaLogLevel.error, maxThreads: 0,
        });
    } catch (e) {
        process.stderr.write(`llamacpp_probs: llama.cpp's prebuilt CPU library does not load: ${e.message}\n`);
        process.exit(3);
    }
    return { lib, llama };
}

// The context the comparisons use: float32 KV cache (the default is F16, which would round
// every cached key and value), flash attention off (another kernel, another summation order; the
// plain softmax(QK^T)V path is the one measured), one sequence, one batch for the whole prompt
// (so no position is evaluated in a different ubatch), threads as asked.
function contextOptions(nTokens, threads) {
    const size = Math.max(nTokens + 1, 64);
    return {
        contextSize: size, batchSize: size, sequences: 1, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
        threads: { ideal: threads, min: threads }, swaFullCache: true,
    };
}

async function loadModel(llama, file, opts = {}) {
    return await llama.loadModel({
        modelPath: path.resolve(file), gpuLayers: 0, useMmap: true, checkTensors: true,
        defaultContextFlashAttention: false, ...opts,
    });
}

async function cmdProbs(llama, opt) {
    const model = await loadModel(llama, opt.model);
    const ctxOpts = contextOptions(opt.ids.length, opt.threads);
    const context = await model.createContext(ctxOpts);
    const seq = context.getSequence();
    // Every item asks for the next-token distribution. With no sampling options the addon uses
    // temperature 0 (greedy sampler), which reorders but does not truncate the candidates, so
    // all n_vocab raw logits come back softmaxed (float32 expf, float32 running sum, sorted by
    // logit; AddonContext.cpp SampleToken). We check that the map really has n_vocab entries.
    const out = await seq.controlledEvaluate(opt.ids.map(t => [t, { generateNext: { probabilities: true } }]));
    const probs = [], argmax = [];
    let nVocab = -1;
    for (let j = 0; j < opt.ids.length; j++) {
        const m = out[j]?.next?.probabilities;
        if (!m) throw new Error(`no probabilities at position ${j}`);
        if (nVocab < 0) nVocab = m.size;
        if (m.size !== nVocab) throw new Error(`position ${j}: ${m.size} probabilities, expected ${nVocab}`);
        const p = new Array(nVocab).fill(null);
        for (const [tok, pr] of m) p[tok] = pr;
        if (p.some(x => x === null)) throw new Error(`position ${j}: probabilities do not cover ids 0..${nVocab - 1}`);
        probs.push(p);
        argmax.push(m.keys().next().value);  // the map is sorted by logit, highest first
    }
    const info = describe(model, opt.tokenize);
    if (info.n_vocab !== null && info.n_vocab !== nVocab)
        throw new Error(`${nVocab} probabilities per position, but the file has ${info.n_vocab} tokens`);
    const res = {
        peer: `node-llama-cpp ${VERSION}`, model: opt.model, n_vocab: nVocab, ids: opt.ids, argmax, probs, info,
        options: {
            gpu: false, threads: context.currentThreads, contextSize: context.contextSize,
            batchSize: context.batchSize, flashAttention: context.flashAttention,
            kvCacheKeyType: context.kvCacheKeyType, kvCacheValueType: context.kvCacheValueType,
        },
    };
    process.stdout.write(JSON.stringify(res) + "\n");
    await context.dispose();
    await model.dispose();
}

// llama.cpp's view of the loaded file, and (tokenize: a .jsonl file of JSON strings) the ids its
// tokenizer gives each string: model.tokenize(text, false) = common_tokenize(vocab, text,
// add_special = false, parse_special = false): no BOS/EOS, special-token text is plain text.
function describe(model, tokenize) {
    const tk = model.fileInfo.metadata.tokenizer?.ggml ?? {};
    const res = {
        architecture: model.fileInfo.metadata.general?.architecture ?? null,
        n_ctx_train: model.trainContextSize,
        n_embd: model.embeddingVectorSize,
        vocabulary_type: model.vocabularyType,
        tokenizer_model: tk.model ?? null,
        tokenizer_pre: tk.pre ?? null,
        n_vocab: Array.isArray(tk.tokens) ? tk.tokens.length : null,
        bos: model.tokens.bos, eos: model.tokens.eos, eot: model.tokens.eot, nl: model.tokens.nl,
        bos_string: model.tokens.bosString, eos_string: model.tokens.eosString,
        add_bos: model.tokens.shouldPrependBosToken, add_eos: model.tokens.shouldAppendEosToken,
        description: model.typeDescription,
    };
    if (tokenize) {
        const lines = fs.readFileSync(tokenize, "utf8").split("\n").filter(l => l.length > 0);
        res.tokenized = lines.map(l => Array.from(model.tokenize(JSON.parse(l), false)));
    }
    return res;
}

async function cmdInfo(llama, opt) {
    const model = await loadModel(llama, opt.model);
    process.stdout.write(JSON.stringify({ peer: `node-llama-cpp ${VERSION}`, ...describe(model, opt.tokenize) }) + "\n");
    await model.dispose();
}

async function cmdBench(lib, llama, opt) {
    const model = await loadModel(llama, opt.model);
    const ctxOpts = contextOptions(opt.n + 2, opt.threads);
    if (opt.kv === "f16")  // llama.cpp's defaults: F16 KV cache, flash attention where supported
        Object.assign(ctxOpts, { experimentalKvCacheKeyType: "F16", experimentalKvCacheValueType: "F16", flashAttention: "auto" });
    const context = await model.createContext(ctxOpts);
    const seq = context.getSequence();
    // Greedy, end-of-generation tokens forbidden so that exactly n tokens come; every generated
    // token is one llama_decode of one token plus greedy sampling over the vocabulary.
    const bias = lib.TokenBias.for(model);
    for (const t of [model.tokens.eos, model.tokens.eot].filter(t => t != null))
        bias.set(t, "never");
    let n = 0, t0 = 0n, tFirst = 0;
    const start = process.hrtime.bigint();
    for await (const tok of seq.evaluate([opt.first], { temperature: 0, tokenBias: bias })) {
        void tok;
        if (n === 0) { t0 = process.hrtime.bigint(); tFirst = Number(t0 - start) / 1e9; }
        n++;
        if (n > opt.n) break;
    }
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    process.stdout.write(JSON.stringify({
        peer: `node-llama-cpp ${VERSION}`, model: opt.model, threads: context.currentThreads,
        kv: `${context.kvCacheKeyType}/${context.kvCacheValueType}`, flash_attention: context.flashAttention,
        tokens: n - 1, seconds: dt, tokens_per_s: (n - 1) / dt, first_token_s: tFirst,
    }) + "\n");
    await context.dispose();
    await model.dispose();
}

const opts = parseArgs(process.argv.slice(2));
const { lib, llama } = await loadPackage();
// Several models in one call share the ~1 s of loading the package and the library; one JSON
// line per model, in order.
for (const [i, model] of opts.models.entries()) {
    const opt = { ...opts, model };
    if (opts.tokenizeOnly && !opts.tokenizeOnly.has(i))
        opt.tokenize = null;
    try {
        if (opt.cmd === "probs") await cmdProbs(llama, opt);
        else if (opt.cmd === "info") await cmdInfo(llama, opt);
        else await cmdBench(lib, llama, opt);
    } catch (e) {
        process.stderr.write(`llamacpp_probs: ${opt.cmd} ${opt.model}: ${e.message}\n`);
        process.exit(1);
    }
}
await llama.dispose();
