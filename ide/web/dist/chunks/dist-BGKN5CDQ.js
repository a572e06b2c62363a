import{a,b,c,d}from"./chunk-MHZ3UMUI.js";import"./chunk-UP5MGHKC.js";import"./chunk-2ZI3LB3M.js";export{d as css,b as cssCompletionSource,c as cssLanguage,a as defineCSSCompletionSource};
