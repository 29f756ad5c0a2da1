#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "sl_common.h"
#include "sl_kern.h"
#include "stream_pass.h" /* tests/bench/: build with -Itests/bench */
#include "sl_model.h"
int mb_rt = 0; size_t mb_dist = 16384; int mb_hint = 0;
static const char *CONFIG = "{\"vocab_size\":50257,\"n_layer\":12,\"n_head\":12,\"n_kv_head\":12,\"d_model\":768,"
                            "\"d_ff\":3072,\"max_seq_len\":1024,\"norm_eps\":1e-5,\"tied_embeddings\":true}";
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    const char *path=getenv("MODEL")?getenv("MODEL"):"build/bench_gpt2_124m_f16.safetensors"; struct stat st;
    if(getenv("MB_LARGE")) CONFIG="{\"vocab_size\":50257,\"n_layer\":36,\"n_head\":20,\"n_kv_head\":20,\"d_model\":1280,\"d_ff\":5120,\"max_seq_len\":1024,\"norm_eps\":1e-5,\"tied_embeddings\":true}";
    if(stat(path,&st)){ sl_model_config cfg; sl_dtype dt; sl_dtype_parse("f16",&dt);
      if(sl_model_config_parse(CONFIG,SL_ARCH_GPT2,"bench",&cfg)||sl_model_init_write(path,SL_ARCH_GPT2,&cfg,124,dt,0.02,NULL)){fprintf(stderr,"%s\n",sl_errmsg());return 1;} }
    stat(path,&st);
    int nv=(argc-1)/3; int mo[8]; size_t dd[8]; int hh[8];
    for(int i=0;i<nv;i++){mo[i]=atoi(argv[1+3*i]); dd[i]=atol(argv[2+3*i]); hh[i]=atoi(argv[3+3*i]);}
    sl_model *m; sl_model_ctx *c; if(sl_model_open(path,&m)||sl_model_ctx_alloc(m,256,&c)){fprintf(stderr,"%s\n",sl_errmsg());return 1;}
    size_t V=m->cfg.vocab_size; float *lg=malloc(64*V*4); int32_t tok[64]; for(int i=0;i<64;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(c,tok,64,lg); sl_model_truncate(c,64);
    size_t wb=(size_t)st.st_size; if(getenv("WB")) wb=atol(getenv("WB"));
    size_t nf=wb/4&~(size_t)31; float*buf=aligned_alloc(64,nf*4); for(size_t i=0;i<nf;i++) buf[i]=(float)(i&7);
    float *ref=malloc(V*4);
    int R=getenv("R")?atoi(getenv("R")):25; double ra[8][400], tt[8][400], sink=0, tb[8]; for(int v=0;v<nv;v++) tb[v]=1e9;
    for(int r=0;r<R;r++) for(int v=0;v<nv;v++){
        mb_rt=mo[v]; mb_dist=dd[v]; mb_hint=hh[v];
        double ts=stream_pass(buf,nf,&sink); double t0=sl_now_s();
        sl_model_forward(c,tok,1,lg); double td=sl_now_s()-t0; sl_model_truncate(c,64);
        if(r==0&&v==0) memcpy(ref,lg,V*4); else if(memcmp(ref,lg,V*4)) printf("variant %d: LOGITS DIFFER\n",v);
        ra[v][r]=(wb/td)/(nf*4/ts); tt[v][r]=td; if(td<tb[v]) tb[v]=td;
    }
    for(int v=1;v<nv;v++){double pr[400]; for(int r=0;r<R;r++) pr[r]=tt[v][r]/tt[0][r]; qsort(pr,R,sizeof(double),cmpd); printf("  paired t(variant %d)/t(variant 0): median %.3f [q1 %.3f, q3 %.3f]\n",v,pr[R/2],pr[R/4],pr[3*R/4]);}
    for(int v=0;v<nv;v++){qsort(ra[v],R,sizeof(double),cmpd); printf("T=%d mode %d d=%zu h=%d: best %.2f ms, median ratio %.1f%% [%.1f, %.1f]\n",omp_get_max_threads(),mo[v],dd[v],hh[v],tb[v]*1e3,100*ra[v][R/2],100*ra[v][R/4],100*ra[v][3*R/4]);}
    if(sink==42)puts(""); return 0;
}
