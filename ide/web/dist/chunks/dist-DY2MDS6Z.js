import{a,b,c,d}from"./chunk-CUM6LFLF.js";import"./chunk-M4Z76F4Q.js";import"./chunk-V3FPOMYE.js";export{d as css,b as cssCompletionSource,c as cssLanguage,a as defineCSSCompletionSource};
