# expect: accept
# args: --compute bf16 --dtype bf16
def epi(accum):
    D = accum / 3
    m = max(D, dim=0)
    return D, m
