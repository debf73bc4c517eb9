import time

import numpy as np
from shared import CELLS, cell, level_t_field

for name in CELLS:
    data,p=cell(name); f=level_t_field(data,p)
    b=None; f.gradients(f.initial_state()[None]); b=f._blocks
    K,N=len(data.classes), f.sample.samples_per_class
    th=f.initial_state()
    t=time.perf_counter()
    for _ in range(5): f.gradients(th[None])
    t1=(time.perf_counter()-t)/5
    W=np.random.default_rng(0).standard_normal((32,K,N))
    t=time.perf_counter(); f.gradients(th[None],weights=W); t2=time.perf_counter()-t
    print(name, "n",f.size,"ny",f._ny,"C",f.C,"R",f.R,"K",K,"N",N,"s",b.column.shape, "B",p.batch_size, "grad ms %.1f"%(1e3*t1), "32 weighted ms %.1f"%(1e3*t2), flush=True)
