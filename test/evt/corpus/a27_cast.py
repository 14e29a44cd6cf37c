# expect: accept
def epi(accum):
    h = cast(accum, "f16")
    D = h + cast(accum * 3, "bf16")
    return D
