/* dteam.c: the distilled draft's four steps after each t(5) of the shipped target, the draft's
 * context in one team per step (c->team = 1) or not (0, the default for its size), alternated
 * round by round; medians per step and of the pair ratios. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_common.h"
#include "sl_model.h"
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
    sl_model *mt,*md; sl_model_ctx *ct,*cd;
    if(sl_model_open("models/family/target.safetensors",&mt)||sl_model_ctx_alloc(mt,256,&ct)) return 1;
    if(sl_model_open(getenv("DRAFT")?getenv("DRAFT"):"models/family/draft-s-distilled.safetensors",&md)||sl_model_ctx_alloc(md,256,&cd)) return 1;
    size_t V=4096; float *lg=malloc(80*V*4), *ref=malloc(4*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(ct,tok,64,lg); sl_model_truncate(ct,64); sl_model_forward(cd,tok,64,lg); sl_model_truncate(cd,64);
    enum{R=400}; static double d[2][5][R]; int differ=0;
    for(int r=0;r<R;r++){
        const int v = (r + r/2) % 2; /* 0 1 1 0 0 1 1 0 ...: each setting first half the time */
        cd->team = v;
        double s=0;
        for(int i=0;i<4;i++){ double t0=sl_now_s(); sl_model_forward(cd,tok+64+i,1,lg+i*V); double t=sl_now_s()-t0; d[v][i][r/2]=t; s+=t; }
        d[v][4][r/2]=s;
        if(r==0) memcpy(ref,lg,4*V*4); else if(memcmp(ref,lg,4*V*4)) differ=1;
        sl_model_truncate(cd,64);
        if(!getenv("NOTARGET")){ sl_model_forward(ct,tok+64,5,lg); sl_model_truncate(ct,64); }
    }
    const int n=R/2; double pr[R/2]; for(int r=0;r<n;r++) pr[r]=d[1][4][r]/d[0][4][r]; qsort(pr,n,sizeof(double),cmpd);
    for(int v=0;v<2;v++){ printf("T=%d team=%d:",omp_get_max_threads(),v); for(int i=0;i<5;i++){ qsort(d[v][i],n,sizeof(double),cmpd); printf(" %s %.4f",i<4?"step":"four",d[v][i][n/2]*1e3);} printf(" ms (medians)\n"); }
    printf("four steps, team 1 / team 0: median of pair ratios %.3f [q1 %.3f, q3 %.3f]%s\n",pr[n/2],pr[n/4],pr[3*n/4],differ?"  LOGITS DIFFER":"");
    return 0;
}
