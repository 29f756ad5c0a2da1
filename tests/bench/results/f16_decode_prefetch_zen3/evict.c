/* evict.c: the distilled draft's four steps after each t(5) of the shipped target, 200 rounds,
 * medians per step. Built with -DMB_PAR (and sl_kern.c from a copy of models/ whose matmul opens a
 * team at work >= mb_par instead of 2^20), the rounds alternate the threshold 2^20 / 2^18
 * (draft_threshold.txt); without it, one setting (evict.txt). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
#ifdef MB_PAR
size_t mb_par = 1u << 20;
enum { NSET = 2 };
#else
enum { NSET = 1 };
#endif
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
    sl_model *mt,*md; sl_model_ctx *ct,*cd;
    if(sl_model_open("models/family/target.safetensors",&mt)||sl_model_ctx_alloc(mt,256,&ct)) return 1;
    if(sl_model_open("models/family/draft-s-distilled.safetensors",&md)||sl_model_ctx_alloc(md,256,&cd)) return 1;
    size_t V=4096; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(ct,tok,64,lg); sl_model_truncate(ct,64); sl_model_forward(cd,tok,64,lg); sl_model_truncate(cd,64);
    enum{R=200}; double d[NSET][4][R], tv[R];
    for(int r=0;r<R;r++){
        const int v = r % NSET;
#ifdef MB_PAR
        mb_par = v ? (1u << 18) : (1u << 20);
#endif
        for(int i=0;i<4;i++){ double t0=sl_now_s(); sl_model_forward(cd,tok+64+i,1,lg); d[v][i][r/NSET]=sl_now_s()-t0; }
        sl_model_truncate(cd,64);
        double t0=sl_now_s(); sl_model_forward(ct,tok+64,5,lg); tv[r]=sl_now_s()-t0; sl_model_truncate(ct,64);
    }
    const int n = R / NSET;
    for(int v=0;v<NSET;v++) for(int i=0;i<4;i++){ qsort(d[v][i],n,sizeof(double),cmpd);
        printf("T=%d %sdraft step %d after a target verify: median %.3f ms\n",omp_get_max_threads(),NSET==1?"":v?"threshold 2^18 ":"threshold 2^20 ",i+1,d[v][i][n/2]*1e3);}
    qsort(tv,R,sizeof(double),cmpd); printf("target t(5) median %.3f ms\n",tv[R/2]*1e3);
    return 0;
}
