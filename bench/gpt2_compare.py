#!/usr/bin/env python3
"""GPT-2 with and without compilation: kiln's modes next to PyTorch's.

  python3 bench/gpt2_compare.py KILN_MODES.json TORCH.jsonl [--png OUT.png] > table.md

KILN_MODES.json is `kiln-gpt2-bench --compare`'s output, TORCH.jsonl
bench/gpt2_baselines.py's (rows of the same batch and 128 new tokens are
used). Prints two markdown tables (generation time per prompt length and
mode, with the speed-up over each side's plain mode; first calls and
compilations per new prompt length) and, with --png, plots the first.
"""
import argparse
import json
import sys

KILN_MODES = ["default", "reduce-overhead", "max-autotune"]
TORCH_MODES = ["eager", "compile", "reduce-overhead"]
TORCH_NAMES = {"eager": "PyTorch eager", "compile": "torch.compile",
               "reduce-overhead": "torch.compile reduce-overhead"}


def load(kiln_path, torch_path):
    kiln = json.load(open(kiln_path))
    new, batch = kiln["new_tokens"], kiln["batch"]
    kiln_rows = {m["mode"]: m for m in kiln["modes"]}
    torch_rows = {}
    info = {}
    for line in open(torch_path):
        r = json.loads(line)
        if r["mode"] == "info":
            info = r
        elif r["batch"] == batch and r["new_tokens"] == new:
            torch_rows.setdefault(r["mode"], {})[r["prompt"]] = r
    return kiln, kiln_rows, torch_rows, info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("torch")
    ap.add_argument("--png")
    args = ap.parse_args()
    kiln, kiln_rows, torch_rows, info = load(args.kiln, args.torch)
    prompts = [p["prompt"] for p in kiln_rows["default"]["prompts"]]
    kms = {m: {p["prompt"]: p for p in kiln_rows[m]["prompts"]} for m in KILN_MODES if m in kiln_rows}
    tmodes = [m for m in TORCH_MODES if m in torch_rows]

    print(f"GPT-2 {kiln['model']} {kiln['precision']}, batch {kiln['batch']}, {kiln['new_tokens']} new tokens, "
          f"greedy; {kiln['device']}; torch {info.get('torch', '?')}. Milliseconds per generation "
          "(prefill and every decode step); in brackets the speed-up over the same side's plain mode.\n")
    head = ["prompt"] + [f"kiln {m}" for m in kms] + [TORCH_NAMES[m] for m in tmodes] + \
        ["kiln reduce-overhead vs torch.compile reduce-overhead"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for p in prompts:
        base = kms["default"][p]["generate_ms"]
        cells = [str(p)]
        for m in kms:
            ms = kms[m][p]["generate_ms"]
            cells.append(f"{ms:.1f} ({base / ms:.2f}x)")
        tbase = torch_rows.get("eager", {}).get(p, {}).get("generate_ms")
        for m in tmodes:
            r = torch_rows[m].get(p)
            cells.append("-" if r is None else
                         f"{r['generate_ms']:.1f}" + (f" ({tbase / r['generate_ms']:.2f}x)" if tbase else ""))
        ro = torch_rows.get("reduce-overhead", {}).get(p)
        cells.append(f"{ro['generate_ms'] / kms['reduce-overhead'][p]['generate_ms']:.2f}x" if ro else "-")
        print("| " + " | ".join(cells) + " |")

    print("\nFirst calls: kiln's first call is building the model (kernels compiled or read from the kernel "
          "cache) plus the first generation; PyTorch's is the first generation, compilation and graph capture "
          "included. Per new prompt length: the kernels kiln compiled or tuned, the graphs dynamo compiled.\n")
    head = ["mode", "first call s"] + [f"prompt {p}: first generation ms, compiled" for p in prompts]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for m in kms:
        row = kiln_rows[m]
        cells = [f"kiln {m}", f"{row['first_call_s']:.2f}"]
        for p in prompts:
            r = kms[m][p]
            what = f"{r['new_kernels']} kernels"
            if r["tuned_kernels"]:
                what += f" ({r['tuned_kernels']} tuned in {r['tuning_s']:.1f} s)"
            cells.append(f"{r['first_ms']:.0f}, {what}")
        print("| " + " | ".join(cells) + " |")
    for m in tmodes:
        rows = torch_rows[m]
        first = rows.get(prompts[0])
        cells = [TORCH_NAMES[m], f"{first['first_call_s']:.2f}" if first else "-"]
        for p in prompts:
            r = rows.get(p)
            cells.append("-" if r is None else
                         f"{r['first_call_s'] * 1e3:.0f}, {r['graphs_first_call']} graphs"
                         + (f" (+{r['graphs_timed']} when timed)" if r["graphs_timed"] else ""))
        print("| " + " | ".join(cells) + " |")

    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        series = [(f"kiln {m}", [kms[m][p]["generate_ms"] for p in prompts]) for m in kms]
        series += [(TORCH_NAMES[m], [torch_rows[m].get(p, {}).get("generate_ms", 0) for p in prompts])
                   for m in tmodes]
        fig, ax = plt.subplots(figsize=(9, 5))
        width = 0.8 / len(series)
        colors = ["#f4a261", "#e76f51", "#9d0208", "#8ecae6", "#219ebc", "#023047"]
        for i, (name, ys) in enumerate(series):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(prompts))]
            bars = ax.bar(xs, ys, width, label=name, color=colors[i % len(colors)])
            ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        ax.set_xticks(range(len(prompts)), [f"{p}-token prompt" for p in prompts])
        ax.set_ylabel(f"ms to generate {kiln['new_tokens']} tokens")
        ax.set_title(f"GPT-2 {kiln['model']} {kiln['precision']}, batch {kiln['batch']}, {kiln['device']}")
        ax.set_ylim(top=max(max(ys) for _, ys in series) * 1.12)
        ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"\nplot: {args.png}", file=sys.stderr)


if __name__ == "__main__":
    main()
