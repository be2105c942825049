# Horizontal bar chart of the median launch time per tool (called by bench/report.py).
# Variables from the command line (-e): data, out, n (rows), xmin, xmax, target (ms; the
# issue's 0.4x bwrap line, 0 for none), subtitle.
# Data columns: "label" median_ms colour(rgb int) "annotation"
set terminal pngcairo size 1000,480 font "DejaVu Sans,11" noenhanced
set output out
set title "One-shot launch of /bin/true: median wall time (lower is better)\n" . subtitle font ",13"
set logscale x 10
set xrange [xmin:xmax]
set yrange [-0.6:n + 0.1]
set xlabel "median wall time per launch, ms (log scale)"
set format x "%g"
set grid xtics lc rgb "#cccccc" lw 1 dt 1
set ytics nomirror scale 0
set xtics nomirror
set border 3
unset key
if (target > 0) {
    set arrow 1 from target, graph 0 to target, graph 1 nohead lc rgb "#d1495b" dt 2 lw 1.5
    set label 1 sprintf("target: 0.4x bwrap = %.2f ms", target) at target, graph 1 \
        offset char 0.5, -0.8 left textcolor rgb "#d1495b" font ",10"
}
set style fill solid 0.85 noborder
set datafile separator "\t"
plot data using (xmin):0:(xmin):2:($0 - 0.32):($0 + 0.32):3:ytic(1) with boxxyerror lc rgb variable, \
     data using 2:0:4 with labels left offset char 0.6, 0 font ",10"
