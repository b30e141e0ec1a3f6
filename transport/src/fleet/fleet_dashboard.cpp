// The fleet dashboard page (/fleet): one row per node, filter, sort, pages; a node's GPUs and
// processes on demand. It fetches /api/v1/nodes every 2 s (one summary per node, ~300 bytes)
// and a node's snapshots only when opened, so the page stays light at thousands of nodes.
#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport {

namespace {

constexpr std::string_view kFleetHtml = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpustream fleet</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
body{font:14px system-ui,sans-serif;margin:0;background:#111;color:#ddd}
header{padding:10px 16px;background:#1b1b1b;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
h1{font-size:16px;margin:0}.up{color:#6c6}.stale{color:#eb4}.gone{color:#e66}
input,select,button{background:#222;color:#ddd;border:1px solid #444;padding:3px 6px}
table{border-collapse:collapse;width:100%}th,td{padding:3px 8px;text-align:right;border-bottom:1px solid #222}
th{cursor:pointer;position:sticky;top:0;background:#1b1b1b}td:first-child,th:first-child{text-align:left}
tr.node:hover{background:#1e2630;cursor:pointer}#detail{padding:8px 16px;background:#161a20}
.bar{display:inline-block;height:8px;background:#4a8;vertical-align:middle}
small{color:#888}
</style></head><body>
<header><h1>gpustream fleet</h1><span id="counts"></span>
<input id="filter" placeholder="filter nodes" size="20">
<select id="state"><option value="">all states</option><option>up</option><option>stale</option><option>gone</option></select>
<button id="prev">&lt;</button><span id="page"></span><button id="next">&gt;</button>
<small id="status"></small></header>
<div id="detail" hidden></div>
<table><thead><tr><th data-k="node">node</th><th data-k="state">state</th><th data-k="age_seconds">last heard (s)</th>
<th data-k="devices">GPUs</th><th data-k="utilization_percent_mean">util %</th><th data-k="memory_used_bytes">memory used</th>
<th data-k="memory_total_bytes">memory total</th><th data-k="power_watts">power W</th><th data-k="processes">procs</th>
<th data-k="agent">agent</th></tr></thead><tbody id="rows"></tbody></table>
<script>
"use strict";
const PAGE=100;const token=new URLSearchParams(location.search).get("token");
const q=p=>token?p+(p.includes("?")?"&":"?")+"token="+encodeURIComponent(token):p;
let nodes=[],sortKey="node",sortDir=1,page=0,open=null;
const esc=s=>String(s).replace(/[&<>"']/g,c=>"&#"+c.charCodeAt(0)+";");
const gib=b=>b==null?"–":(b/1073741824).toFixed(1)+" GiB";
const num=(v,d)=>v==null?"–":v.toFixed(d);
function view(){const f=document.getElementById("filter").value.toLowerCase();
const st=document.getElementById("state").value;
let list=nodes.filter(n=>(!f||n.node.toLowerCase().includes(f))&&(!st||n.state==st));
list.sort((a,b)=>{const x=a[sortKey],y=b[sortKey];if(x==y)return 0;if(x==null)return 1;if(y==null)return -1;return(x<y?-1:1)*sortDir;});
const pages=Math.max(1,Math.ceil(list.length/PAGE));page=Math.min(page,pages-1);
document.getElementById("page").textContent=(page+1)+"/"+pages+" ("+list.length+")";
document.getElementById("rows").innerHTML=list.slice(page*PAGE,page*PAGE+PAGE).map(n=>
"<tr class=node data-n=\""+esc(n.node)+"\"><td>"+esc(n.node)+"</td><td class="+n.state+">"+n.state+"</td><td>"+num(n.age_seconds,1)+
"</td><td>"+n.devices+"</td><td>"+(n.utilization_percent_mean==null?"–":"<span class=bar style=width:"+Math.round(n.utilization_percent_mean/2)+"px></span> "+num(n.utilization_percent_mean,0))+
"</td><td>"+gib(n.memory_used_bytes)+"</td><td>"+gib(n.memory_total_bytes)+"</td><td>"+num(n.power_watts,0)+"</td><td>"+n.processes+"</td><td>"+esc(n.agent)+"</td></tr>").join("");}
async function refresh(){try{const r=await fetch(q("/api/v1/nodes"));const d=await r.json();nodes=d.nodes;
document.getElementById("counts").innerHTML="<span class=up>"+d.up+" up</span> · <span class=stale>"+d.stale+" stale</span> · <span class=gone>"+d.gone+" gone</span>";
document.getElementById("status").textContent="stale after "+d.stale_after_seconds+" s, gone after "+d.gone_after_seconds+" s";view();
if(open)detail(open);}catch(e){document.getElementById("status").textContent="cannot reach the fleet: "+e;}}
async function detail(node){open=node;const el=document.getElementById("detail");el.hidden=false;
const r=await fetch(q("/api/v1/snapshot?node="+encodeURIComponent(node)));const d=await r.json();
let h="<b>"+esc(node)+"</b> <button id=close>close</button>";
for(const s of d.snapshots){for(const e of s.errors)h+="<div class=stale>"+esc(e.code)+": "+esc(e.message)+"</div>";
h+="<table><tr><th>probe "+esc(s.probe)+" · GPU</th><th>util %</th><th>memory used</th><th>free</th><th>temp °C</th><th>power W</th><th>processes</th></tr>";
for(const g of s.devices){const m=g.metrics||{},a=g.absent||{},v=k=>typeof m[k]=="number"?m[k]:null;
const why=k=>a[k]?"<small>"+esc(a[k])+"</small>":"–";
const cell=(k,fn)=>v(k)==null?why(k):fn(v(k));
h+="<tr><td>"+esc(g.index+" "+g.name+" "+g.id)+"</td><td>"+cell("utilization_percent",x=>x.toFixed(0))+"</td><td>"+cell("memory_used_bytes",gib)+
"</td><td>"+cell("memory_free_bytes",gib)+"</td><td>"+cell("temperature_celsius",x=>x.toFixed(0))+"</td><td>"+cell("power_watts",x=>x.toFixed(0))+
"</td><td>"+(g.processes_absent?"<small>"+esc(g.processes_absent)+"</small>":(g.processes||[]).map(p=>esc(p.pid+" "+p.name+" "+gib(p.gpu_memory_bytes))).join("<br>"))+"</td></tr>";}
h+="</table>";}
el.innerHTML=h;document.getElementById("close").onclick=()=>{open=null;el.hidden=true;};}
document.getElementById("rows").onclick=e=>{const tr=e.target.closest("tr.node");if(tr)detail(tr.dataset.n);};
document.querySelector("thead").onclick=e=>{const k=e.target.dataset.k;if(!k)return;sortDir=k==sortKey?-sortDir:1;sortKey=k;view();};
document.getElementById("filter").oninput=()=>{page=0;view();};document.getElementById("state").onchange=()=>{page=0;view();};
document.getElementById("prev").onclick=()=>{page=Math.max(0,page-1);view();};document.getElementById("next").onclick=()=>{page++;view();};
refresh();setInterval(refresh,2000);
</script></body></html>
)html";

}  // namespace

std::string_view fleet_dashboard_html() noexcept { return kFleetHtml; }

}  // namespace gpustream::transport
