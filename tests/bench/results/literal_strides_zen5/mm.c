/* packed f16 matrices (out x in each, count of them), one matmul call per matrix, n tokens; time per sweep over all */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sl_common.h"
#include "sl_kern.h"
int mb_xt = 0;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    size_t in=atoi(argv[1]), out=atoi(argv[2]), cnt=atoi(argv[3]); int R=atoi(argv[4]);
    sl_dtype DT=getenv("F32")?SL_DT_F32:SL_DT_F16; size_t pb=sl_kern_packed_bytes(DT,out,in);
    float *s32=malloc(in*out*4); for(size_t i=0;i<in*out;i++) s32[i]=(float)((i*2654435761u)%1000)/1000.f-0.5f; void *src=malloc(in*out*4); sl_kern_from_f32(src,s32,DT,in*out);
    unsigned char **W=malloc(cnt*sizeof*W); for(size_t c=0;c<cnt;c++){W[c]=aligned_alloc(64,(pb+63)/64*64); sl_kern_pack(W[c],src,DT,out,in);}
    float *x=malloc(8*in*4), *y=malloc(8*out*4); for(size_t i=0;i<8*in;i++) x[i]=(float)(i%17)/17.f;
    for(int ai=5;ai<argc;ai++){ int ns[2]; size_t ds[2]; sscanf(argv[ai],"%d,%d,%zu,%zu",&ns[0],&ns[1],&ds[0],&ds[1]);
      static double t[2][2000], pr[2000];
      for(int r=0;r<R;r++) for(int k=0;k<2;k++){int v=(r&1)?1-k:k; mb_xt=(int)ds[v]; double t0=sl_now_s();
        for(size_t c=0;c<cnt;c++){ sl_kern_mm mm={y,W[c],DT,NULL,out,0,1,NULL}; sl_kern_matmul_multi(&mm,1,x,ns[v],in);} t[v][r]=sl_now_s()-t0;}
      for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,sizeof(double),cmpd); qsort(t[0],R,8,cmpd); qsort(t[1],R,8,cmpd);
      double bytes=(double)pb*cnt;
      printf("%zux%zu x%zu (%.1f MB) threads %d: %s n=%d %.3f ms (%.1f GB/s), n=%d %.3f ms (%.1f GB/s, %.1f GFLOP/s); ratio %.3f [%.3f, %.3f]\n",out,in,cnt,bytes/1e6,omp_get_max_threads(),argv[ai],
        ns[0],t[0][R/2]*1e3,bytes/t[0][R/2]/1e9,ns[1],t[1][R/2]*1e3,bytes/t[1][R/2]/1e9,2.0*ns[1]*in*out*cnt/t[1][R/2]/1e9,pr[R/2],pr[R/4],pr[3*R/4]);}
    return 0;}
