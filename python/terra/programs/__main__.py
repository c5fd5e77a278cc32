"""python3 -m terra.programs NAME [--mode coexec] [--steps 20] [--quick] [--seed 0] [--compare]: runs one of
the ten programs and prints each step's loss and the Engine's stats; --compare also runs it in eager
and says whether every step's loss is identical (exit status 1 if not)."""
import argparse
import sys

from . import NAMES, get


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m terra.programs", description=__doc__.split(":")[0])
    ap.add_argument("name", choices=NAMES)
    ap.add_argument("--mode", default="coexec", choices=["eager", "lazy", "coexec"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare", action="store_true", help="also run eager and compare every step's loss")
    args = ap.parse_args(argv)
    prog = get(args.name)
    print(f"{args.name} ({prog.FEATURE}), mode {args.mode}, {args.steps} steps{', quick' if args.quick else ''}")
    r = prog.run(mode=args.mode, steps=args.steps, quick=args.quick, seed=args.seed,
                 on_step=lambda i, v: print(f"  step {i:3d}  loss {v!r}", flush=True))
    stats = {k: v for k, v in r.stats.items() if v}
    print(f"wall {r.wall_s:.2f} s; stats {stats}" + (f"; {r.extra}" if r.extra else ""))
    if args.compare and args.mode != "eager":
        ref = prog.run(mode="eager", steps=args.steps, quick=args.quick, seed=args.seed).losses
        diff = [i for i, (a, b) in enumerate(zip(r.losses, ref)) if a != b]
        print("every step's loss equals eager's" if not diff else f"DIFFERS from eager at steps {diff}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
