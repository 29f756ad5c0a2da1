#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
/* -DSIDE: with side_prefetch_experiment.patch's sl_model.c (the switch is mb_side); otherwise with
 * phases_kvpf_experiment.patch's (mb_kvpf). */
#ifdef SIDE
extern double mb_phase[16]; int mb_side;
#define MB_SWITCH mb_side
#else
extern double mb_phase[16]; extern int mb_kvpf;
#define MB_SWITCH mb_kvpf
#endif
int main(int argc,char**argv){
    int n=atoi(argv[1]), R=atoi(argv[2]); MB_SWITCH = argc > 3 ? atoi(argv[3]) : 0; sl_model *m; sl_model_ctx *c;
    if(sl_model_open("models/family/target.safetensors",&m)||sl_model_ctx_alloc(m,256,&c)) return 1;
    size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64); for(int k=0;k<16;k++) mb_phase[k]=0;
    double t0=sl_now_s(); for(int r=0;r<R;r++){ sl_model_forward(c,tok+64,n,lg); sl_model_truncate(c,64); } double tt=(sl_now_s()-t0)/R;
    const char *nm[]={"","norm1","qkv","cache_store","attention","o","norm2","up","act","down","final norm(+layer8 end)","head"};
    double sum=0; printf("threads %d n=%d: pass %.1f us\n",omp_get_max_threads(),n,tt*1e6);
    for(int k=1;k<12;k++){ printf("  %-24s %7.1f us\n",nm[k],mb_phase[k]/R*1e6); sum+=mb_phase[k]/R; } printf("  (sum %.1f us; the rest: embed, region fork/join)\n",sum*1e6); return 0;}
