"""Per .entry and .func of a PTX file: its 16-byte non-caching global
loads (ld.global.nc.L1::no_allocate[.L2::SIZE].v4.u32), its other global loads, and
the functions it calls. Usage: ptx_loads.py FILE.ptx"""
import re
import sys

text = open(sys.argv[1]).read()
heads = list(re.finditer(r"^\.(?:visible |weak )?\.?(entry|func)\s+(?:\([^)]*\)\s*)?(\w+)\(",
                         text, flags=re.M))
for i, h in enumerate(heads):
    body = text[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
    nc = len(re.findall(r"ld\.global\.nc\.L1::no_allocate(?:\.L2::\w+)?\.v4\.u32", body))
    other = len(re.findall(r"ld\.global", body)) - nc
    calls = sorted(set(re.findall(r"call(?:\.uni)?\s*(?:\(\w+\),\s*)?\s*(\w+),", body)))
    print(f"{h.group(1)} {h.group(2)}: {nc} nc.v4 loads, {other} other global loads, "
          f"calls {','.join(calls) or '-'}")
