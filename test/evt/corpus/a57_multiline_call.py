# expect: accept
def epi(accum,
        C,
        bias: "1,N"):
    # comment
    D = clamp(accum + C,
              -2,
              2) + bias  # trailing
    return (D)
