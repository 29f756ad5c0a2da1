#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
int main(int argc,char**argv){
    int n=argc>1?atoi(argv[1]):5, R=argc>2?atoi(argv[2]):2000;
    sl_model *m; sl_model_ctx *c;
    if(sl_model_open("models/family/target.safetensors",&m)||sl_model_ctx_alloc(m,256,&c)) return 1;
    size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    double t0=sl_now_s();
    for(int r=0;r<R;r++){ sl_model_forward(c,tok+64,n,lg); sl_model_truncate(c,64); }
    printf("t(%d) mean %.3f ms\n",n,(sl_now_s()-t0)/R*1e3); return 0;
}
