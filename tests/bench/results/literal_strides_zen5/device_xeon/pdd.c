/* device: a GPT-2-medium-shaped f32 model (1.4 GB, written here if missing), one-token decode with the
 * f32 one-token prefetch distance 16 KiB against each DIST, alternated call by call. usage: pdd PATH ROUNDS DIST... */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "sl_common.h"
#include "sl_model.h"
size_t mb_dist = 16384;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    const char *path=argv[1]; struct stat st;
    if(stat(path,&st)){ sl_model_config cfg; sl_dtype dt; sl_dtype_parse("f32",&dt);
      /* SHAPE=llama110m: llama2.c's stories110M shape (the peers' model) instead of GPT-2-medium's */
      const int ll = getenv("SHAPE") && !strcmp(getenv("SHAPE"), "llama110m");
      const char *C = ll ? "{\"vocab_size\":32000,\"n_layer\":12,\"n_head\":12,\"n_kv_head\":12,\"d_model\":768,\"d_ff\":2048,\"max_seq_len\":1024,\"norm_eps\":1e-5,\"tied_embeddings\":false}"
                         : "{\"vocab_size\":50257,\"n_layer\":24,\"n_head\":16,\"n_kv_head\":16,\"d_model\":1024,\"d_ff\":4096,\"max_seq_len\":1024,\"norm_eps\":1e-5,\"tied_embeddings\":true}";
      const sl_arch A = ll ? SL_ARCH_LLAMA : SL_ARCH_GPT2;
      if(sl_model_config_parse(C,A,"bench",&cfg)||sl_model_init_write(path,A,&cfg,124,dt,0.02,NULL)){fprintf(stderr,"%s\n",sl_errmsg());return 1;} }
    sl_model *m; sl_model_ctx *c; if(sl_model_open(path,&m)||sl_model_ctx_alloc(m,256,&c)){fprintf(stderr,"%s\n",sl_errmsg());return 1;}
    int R=atoi(argv[2]); size_t V=m->cfg.vocab_size; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    for(int ai=3;ai<argc;ai++){ size_t d=(size_t)atol(argv[ai]); static double t[2][4000], pr[4000];
        for(int r=0;r<R;r++) for(int k=0;k<2;k++){ int v=(r&1)?1-k:k; mb_dist = v ? d : 16384;
            double t0=sl_now_s(); sl_model_forward(c,tok+64,1,lg); t[v][r]=sl_now_s()-t0; sl_model_truncate(c,64);}
        for(int r=0;r<R;r++) pr[r]=t[1][r]/t[0][r]; qsort(pr,R,8,cmpd); qsort(t[0],R,8,cmpd); qsort(t[1],R,8,cmpd);
        printf("%s threads %d t(1): 16 KiB %.3f ms, %zu B %.3f ms; ratio median of %d %.3f [q1 %.3f, q3 %.3f]\n",path,omp_get_max_threads(),t[0][R/2]*1e3,d,t[1][R/2]*1e3,R,pr[R/2],pr[R/4],pr[3*R/4]); fflush(stdout);}
    return 0;}
