# speclab plot script: Tokens per iteration: 100000 simulated iterations, γ = 4, α = 0.8061
# made by: speclab plot mc-tokens --family noisy --gamma 4 -o plots/examples/mc-tokens.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'mc-tokens.png'
set title 'Tokens per iteration: 100000 simulated iterations, γ = 4, α = 0.8061'
set xlabel 'N (tokens emitted per iteration)'
set ylabel 'fraction of iterations'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0.40000000000000002:5.5999999999999996]
set yrange [0:0.57363367356769202]
set key top left Left reverse nobox samplen 2 spacing 1.1
data = 'mc-tokens.dat'
plot data index 0 using 1:2:(0.69999999999999996) with boxes fs transparent solid 0.3 border lw 1 lc rgb '#56B4E9' title 'simulated (95% Wilson CI)', \
     data index 1 using 1:2:3:4 with yerrorbars pt 6 ps 0.6 lw 1 lc rgb '#56B4E9' notitle, \
     data index 2 using 1:2 with linespoints lw 1.2 dt 2 pt 5 ps 0.6 lc rgb '#D55E00' title 'Equation 1 (i.i.d. α)', \
     data index 3 using 1:2 with points pt 4 ps 0.7 lc rgb '#000000' title 'position-dependent β_i (exact)'
unset output
